"""Projected attention layers (PALs; Stickland & Murray 2019, "BERT and PALs",
section 3.3), for Part 2's --pals.

Each BERT layer gets a task-specific branch in parallel to it, added inside the layer's last LayerNorm:

    h' = LN(h + SA(h) + FFN(SA(h)) + TS(h)),    TS(h) = V^D MH(V^E h)

V^E (hidden -> d_s) and V^D (d_s -> hidden) are one pair per task shared by all layers, as in the paper;
MH is a small multi-head self-attention in the d_s-dimensional space, its own per task and layer. The
paper's d_s is 204 with 12 heads for BERT-base (hidden 768); --pals_dim defaults to that width scaled to the
checkpoint's hidden size, rounded to a multiple of its head count. V^D starts at zero, so at step 0 every
layer computes what the pretrained BERT does and the branch grows from there (as LoRA's B does).

The model sets `pals.task` before each forward; which task a batch belongs to is known there.
"""
import functools

import torch.nn as nn
import torch.nn.functional as F

from minbert.finetuning.lora import layer_part


def default_dim(hidden_size, heads):
    """204 at BERT-base's 768, scaled to `hidden_size` and rounded to a multiple of `heads` (at least one each)."""
    return heads * max(1, round(204 * hidden_size / 768 / heads))


class LowRankAttention(nn.Module):
    """Multi-head self-attention inside the d_s-dimensional projected space: MH in TS(h) = V^D MH(V^E h)."""

    def __init__(self, dim, heads, dropout):
        super().__init__()
        if dim % heads:
            raise ValueError(f"--pals_dim {dim} must be a multiple of the model's {heads} attention heads")
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.dropout = dropout

    def forward(self, x, attention_mask):
        B, T, D = x.shape
        q, k, v = self.qkv(x).view(B, T, 3, self.heads, D // self.heads).permute(2, 0, 3, 1, 4)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask.to(q.dtype),
                                             dropout_p=self.dropout if self.training else 0.0)
        return out.transpose(1, 2).reshape(B, T, D)


class PALs(nn.Module):
    def __init__(self, config, tasks, dim=None):
        super().__init__()
        H, heads, L = config.hidden_size, config.num_attention_heads, config.num_hidden_layers
        self.dim = dim or default_dim(H, heads)
        self.encoder = nn.ModuleDict({t: nn.Linear(H, self.dim, bias=False) for t in tasks})  # V^E
        self.decoder = nn.ModuleDict({t: nn.Linear(self.dim, H, bias=False) for t in tasks})  # V^D
        self.attention = nn.ModuleDict({t: nn.ModuleList(LowRankAttention(self.dim, heads,
                                                                          config.attention_probs_dropout_prob)
                                                         for _ in range(L)) for t in tasks})
        for d in self.decoder.values():
            nn.init.zeros_(d.weight)
        self.task = None

    def attach(self, bert):
        """Hook one branch into each of `bert`'s layers (BertLayer.parallel); the weights stay here."""
        for i, layer in enumerate(bert.layers):
            parent, attr = layer_part(bert, layer, "parallel")
            setattr(parent, attr, functools.partial(self.branch, i))

    def branch(self, layer, hidden_states, attention_mask):
        if self.task is None:
            raise RuntimeError("PALs: set .task before running the model")
        t = self.task
        return self.decoder[t](self.attention[t][layer](self.encoder[t](hidden_states), attention_mask))
