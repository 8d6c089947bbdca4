"""minBERT: embeddings, multi-head self-attention and transformer layers (handout section 3)."""
import contextlib
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from base_bert import BertPreTrainedModel
from minbert.dropout import Dropout
from minbert.embedding_grad import Embedding
from utils import extended_attention_mask


class BertSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.all_head_size = config.hidden_size
        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)
        # nn.Dropout, with its masks drawn in bulk on the CPU (minbert/dropout.py; config.fast_dropout)
        self.dropout = Dropout(config.attention_probs_dropout_prob, config.fast_dropout)
        self.attn_impl = config.attn_impl
        # Prefix tuning (minbert/finetuning/prefix.py) sets this to f(batch size, dtype) -> (P_k, P_v): keys
        # and values every token can attend to, prepended to the layer's own.
        self.prefix = None

    def transform(self, x, linear_layer):
        """[B, T, d] -> projected and split into heads: [B, heads, T, d/heads]."""
        B, T, _ = x.shape
        proj = linear_layer(x)
        return proj.view(B, T, self.num_attention_heads, self.attention_head_size).transpose(1, 2)

    def attention(self, key, query, value, attention_mask):
        """Equation 1, spelled out: softmax(QK^T / sqrt(d/n) + mask) V, heads merged back to [B, T, d]."""
        scores = query @ key.transpose(-1, -2) / math.sqrt(self.attention_head_size)
        # additive: a large negative number at padded keys (in the scores' dtype, so that under bf16 autocast
        # the T x T scores, probabilities and dropout stay bf16 rather than being promoted to fp32)
        scores = scores + attention_mask.to(scores.dtype)
        probs = self.dropout(torch.softmax(scores, dim=-1))
        return self.merge_heads(probs @ value)

    def merge_heads(self, x):
        B, H, T, D = x.shape
        return x.transpose(1, 2).reshape(B, T, H * D)

    def forward(self, hidden_states, attention_mask):
        device = hidden_states.device.type
        if torch.is_autocast_enabled(device):  # one cast of the input for the three projections, not one each
            hidden_states = hidden_states.to(torch.get_autocast_dtype(device))
        key = self.transform(hidden_states, self.key)
        query = self.transform(hidden_states, self.query)
        value = self.transform(hidden_states, self.value)
        if self.prefix is not None:
            prefix_key, prefix_value = self.prefix(key.shape[0], key.dtype)
            key, value = torch.cat([prefix_key, key], dim=2), torch.cat([prefix_value, value], dim=2)
            attention_mask = F.pad(attention_mask, (prefix_key.shape[2],
                                                    0))  # 0: every prefix position is attended
        if self.attn_impl == "explicit" or self.dropout.bulk(query):
            # In training on the CPU, SDPA with dropout runs this same math (its fused kernel takes
            # no dropout), but draws its mask per element; equation 1 written out takes the
            # bulk-drawn mask of minbert/dropout.py.
            return self.attention(key, query, value, attention_mask)
        # Same math as `attention`, in one fused kernel that never materialises the T x T probabilities
        # on the paths that support it; the additive mask and dropout are passed through unchanged.
        out = F.scaled_dot_product_attention(
            query, key, value, attn_mask=attention_mask.to(query.dtype),
            dropout_p=self.dropout.p if self.training else 0.0)
        return self.merge_heads(out)


class BertLayer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self_attention = BertSelfAttention(config)
        self.attention_dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.attention_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention_dropout = Dropout(config.hidden_dropout_prob, config.fast_dropout)
        self.interm_dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.interm_af = nn.GELU()  # the exact erf GELU, as BERT was trained with
        self.out_dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.out_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.out_dropout = Dropout(config.hidden_dropout_prob, config.fast_dropout)
        # PALs (minbert/finetuning/pals.py) set this to a task-specific branch f(layer input, mask), added
        # inside the last LayerNorm.
        self.parallel = None

    def add_norm(self, input, output, dense_layer, dropout, ln_layer):
        """LN(input + dropout(dense(output))): dropout hits the sub-layer output before the residual sum."""
        return ln_layer(input + dropout(dense_layer(output)))

    def forward(self, hidden_states, attention_mask):
        attn = self.self_attention(hidden_states, attention_mask)  # MH(h) before W^o
        h = self.add_norm(hidden_states, attn, self.attention_dense, self.attention_dropout,
                          self.attention_layer_norm)  # equation 3
        ff = self.interm_af(self.interm_dense(h))  # first half of equation 5
        if self.parallel is not None:  # LN(h + FFN(h) + TS(layer input)): the sum is the same either way
            h = h + self.parallel(hidden_states, attention_mask)
        return self.add_norm(h, ff, self.out_dense, self.out_dropout, self.out_layer_norm)  # equation 6


class BertModel(BertPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        # nn.Embedding, its gradient written into one buffer kept between steps (minbert/embedding_grad.py)
        self.word_embedding = Embedding(config.vocab_size, config.hidden_size,
                                        padding_idx=config.pad_token_id)
        self.pos_embedding = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.tk_type_embedding = nn.Embedding(config.type_vocab_size, config.hidden_size)
        self.embed_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.embed_dropout = Dropout(config.hidden_dropout_prob, config.fast_dropout)
        self.register_buffer("position_ids", torch.arange(config.max_position_embeddings)[None],
                             persistent=False)
        self.bert_layers = nn.ModuleList([BertLayer(config) for _ in range(config.num_hidden_layers)])
        self.pooler_dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.pooler_af = nn.Tanh()
        # SMART (minbert/objectives/smart.py) sets this to a function of the embedding
        # output that adds its perturbation.
        self.perturb = None
        # Freezing (minbert/finetuning/freezing.py): the embeddings and the lowest frozen_groups - 1 layers
        # run without a graph, so no gradient reaches them (they do not change) and their backward costs
        # nothing. 0: everything trains.
        self.frozen_groups = 0
        self.init_weights()

    # The backbone contract every pretrained network here keeps (GPT-2's too): its transformer
    # layers, bottom first, and its embedding modules; freezing, layer-wise rates, adapters and
    # compile read them, never a name. Inside a layer, the parts the adapters wrap or hook into, by
    # role: LoRA (finetuning/lora.py) the linears, Houlsby (houlsby.py) the two output linears and
    # the LayerNorms, prefix tuning (prefix.py) the attention's prefix hook, PALs (pals.py) the
    # layer's parallel branch. A backbone without a part leaves its role out.
    LAYER_PARTS = {"query": "self_attention.query", "key": "self_attention.key",
                   "value": "self_attention.value", "attention_dense": "attention_dense",
                   "interm_dense": "interm_dense", "out_dense": "out_dense",
                   "attention_layer_norm": "attention_layer_norm", "out_layer_norm": "out_layer_norm",
                   "prefix": "self_attention.prefix", "parallel": "parallel"}

    @property
    def layers(self):
        return self.bert_layers

    @property
    def embeddings(self):
        return [self.word_embedding, self.pos_embedding, self.tk_type_embedding, self.embed_layer_norm]

    @property
    def backbone(self):
        """A backbone is its own (a task model's `backbone` is the network inside it)."""
        return self

    def embed(self, input_ids, token_type_ids=None):
        T = input_ids.shape[1]
        if T > self.config.max_position_embeddings:
            raise ValueError(f"input of {T} tokens is longer than max_position_embeddings "
                             f"{self.config.max_position_embeddings}")
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        x = (self.word_embedding(input_ids) + self.pos_embedding(self.position_ids[:, :T])
             + self.tk_type_embedding(token_type_ids))
        return self.embed_dropout(self.embed_layer_norm(x))

    def encode(self, hidden_states, attention_mask):
        mask = extended_attention_mask(attention_mask, hidden_states.dtype)
        for i, layer in enumerate(self.bert_layers):
            with torch.no_grad() if i + 1 < self.frozen_groups else contextlib.nullcontext():
                hidden_states = layer(hidden_states, mask)
        return hidden_states

    def forward(self, input_ids, attention_mask=None, token_type_ids=None):
        if attention_mask is None:
            attention_mask = torch.ones_like(input_ids)
        with torch.no_grad() if self.frozen_groups else contextlib.nullcontext():
            x = self.embed(input_ids, token_type_ids)
        if self.perturb is not None:
            x = self.perturb(x)
        hidden = self.encode(x, attention_mask)
        pooled = self.pooler_af(self.pooler_dense(hidden[:, 0]))  # [CLS] through dense + tanh
        return {"last_hidden_state": hidden, "pooler_output": pooled}
