"""GPT2Model (handout section 5.1): token and position embeddings, a stack of GPT2Layers, a final LayerNorm.

forward gives the handout's two outputs: `last_hidden_state` [B, T, d] and `last_token` [B, d], the hidden
state of each row's last real token (rows are padded on the right, so it is at attention_mask.sum() - 1).
`hidden_state_to_token` is the LM head: the hidden state against every token embedding (the weights are tied).
`encode` takes and returns the key-value cache that generation.py uses."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from gpt2.models.base_gpt import GPTPreTrainedModel
from gpt2.modules.gpt2_layer import GPT2Layer


class GPT2Model(GPTPreTrainedModel):
    def __init__(self, config):
        super().__init__(config)
        self.word_embedding = nn.Embedding(config.vocab_size, config.hidden_size)
        self.pos_embedding = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.embed_dropout = nn.Dropout(config.embed_dropout_prob)
        self.gpt_layers = nn.ModuleList([GPT2Layer(config) for _ in range(config.num_hidden_layers)])
        self.final_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.init_weights()

    def embed(self, input_ids, past_length=0):
        """Token plus position embeddings, positions counted from `past_length` (the tokens already cached)."""
        positions = torch.arange(past_length, past_length + input_ids.shape[1], device=input_ids.device)
        return self.embed_dropout(self.word_embedding(input_ids) + self.pos_embedding(positions))

    def encode(self, input_ids, attention_mask=None, past=None):
        """The final hidden states [B, T, d] of `input_ids` after the cached tokens of `past` (one (K, V) per
        layer, or None), and the cache extended by them. `attention_mask` covers past and new tokens."""
        past_length = past[0][0].shape[2] if past is not None else 0
        hidden = self.embed(input_ids, past_length)
        presents = []
        for i, layer in enumerate(self.gpt_layers):
            hidden, present = layer(hidden, attention_mask, None if past is None else past[i])
            presents.append(present)
        return self.final_layer_norm(hidden), presents

    # The backbone contract BERT's model keeps too (bert.py): the transformer layers, bottom
    # first, the embedding modules, and the parts of a layer the adapters use, by role (no prefix
    # hook and no parallel branch: prefix tuning and PALs are BERT's).
    LAYER_PARTS = {"query": "self_attention.query", "key": "self_attention.key",
                   "value": "self_attention.value", "attention_dense": "attention_dense",
                   "interm_dense": "interm_dense", "out_dense": "out_dense",
                   "attention_layer_norm": "attention_layer_norm", "out_layer_norm": "out_layer_norm"}

    @property
    def layers(self):
        return self.gpt_layers

    @property
    def embeddings(self):
        return [self.word_embedding, self.pos_embedding]

    @property
    def backbone(self):
        return self

    def forward(self, input_ids, attention_mask=None):
        hidden, _ = self.encode(input_ids, attention_mask)
        last = (attention_mask.sum(1) - 1 if attention_mask is not None
                else torch.full((input_ids.shape[0],), input_ids.shape[1] - 1, device=input_ids.device))
        return {"last_hidden_state": hidden, "last_token": hidden[torch.arange(hidden.shape[0]), last.long()]}

    def hidden_state_to_token(self, hidden_state):
        """Logits over the vocabulary: the LM head is the token embedding matrix (tied, as GPT-2 was trained)."""
        return F.linear(hidden_state, self.word_embedding.weight)
