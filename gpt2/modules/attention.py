"""Masked (causal) multi-head self-attention (handout section 5.2), with a key-value cache for generation.

Each token attends to itself and the tokens before it: softmax(QK^T / sqrt(d_k) + M) V, where M is -inf (here
the dtype's most negative number, which softmax turns into 0 without NaNs) above the diagonal and at padded
keys. `attention` spells the equation out; the default runs the same math through torch's fused
scaled_dot_product_attention (`attn_impl='explicit'` takes the spelled-out path, as bert.py does).

The cache: when generating, the keys and values of the tokens already seen do not change, so each step
computes them for the new token only and appends them to `past` (a (K, V) pair, [B, heads, T_past, d_k] each);
the new queries sit at positions T_past.. and may attend to every cached key."""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_mask(t_new, t_total, attention_mask, dtype):
    """The additive mask [B or 1, 1, t_new, t_total]: 0 where query i (at position t_total - t_new + i) may
    look, the dtype's most negative number above the diagonal and at padded keys (attention_mask 0)."""
    device = attention_mask.device if attention_mask is not None else None
    blocked = torch.ones(t_new, t_total, dtype=torch.bool, device=device).triu(t_total - t_new + 1)
    blocked = blocked[None, None]
    if attention_mask is not None:
        blocked = blocked | (attention_mask[:, None, None, :] == 0)
    return torch.zeros(blocked.shape, dtype=dtype, device=device).masked_fill(blocked, torch.finfo(dtype).min)


class CausalSelfAttention(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.num_attention_heads = config.num_attention_heads
        self.attention_head_size = config.hidden_size // config.num_attention_heads
        self.all_head_size = config.hidden_size
        self.query = nn.Linear(config.hidden_size, self.all_head_size)
        self.key = nn.Linear(config.hidden_size, self.all_head_size)
        self.value = nn.Linear(config.hidden_size, self.all_head_size)
        self.dropout = nn.Dropout(config.attention_probs_dropout_prob)
        self.attn_impl = config.attn_impl

    def transform(self, x, linear_layer):
        """[B, T, d] -> projected and split into heads: [B, heads, T, d/heads]."""
        B, T, _ = x.shape
        return linear_layer(x).view(B, T, self.num_attention_heads, self.attention_head_size).transpose(1, 2)

    def attention(self, key, query, value, attention_mask):
        """The handout's masked attention: scores, the causal and padding mask added before the
        softmax, dropout on the probabilities, heads merged back to [B, T, d]. `attention_mask` is the
        additive mask of causal_mask."""
        scores = query @ key.transpose(-1, -2) / math.sqrt(self.attention_head_size)
        probs = self.dropout(torch.softmax(scores + attention_mask, dim=-1))
        return self.merge_heads(probs @ value)

    def merge_heads(self, x):
        """[B, heads, T, d/heads] -> [B, T, d]."""
        B, H, T, D = x.shape
        return x.transpose(1, 2).reshape(B, T, H * D)

    def forward(self, hidden_states, attention_mask=None, past=None):
        """Returns the attended output [B, T, d] and this layer's (K, V) for the cache: `past`'s plus the new
        tokens'. `attention_mask` [B, T_past + T] is 1 at real tokens, 0 at padding (None: all real)."""
        key = self.transform(hidden_states, self.key)
        query = self.transform(hidden_states, self.query)
        value = self.transform(hidden_states, self.value)
        if past is not None:
            key, value = torch.cat([past[0], key], dim=2), torch.cat([past[1], value], dim=2)
        t_new, t_total = query.shape[2], key.shape[2]
        if self.attn_impl == "explicit":
            mask = causal_mask(t_new, t_total, attention_mask, query.dtype).to(query.device)
            return self.attention(key, query, value, mask), (key, value)
        dropout = self.dropout.p if self.training else 0.0
        if attention_mask is None and t_new in (1, t_total):  # no padding: no mask tensor to build or read
            out = F.scaled_dot_product_attention(query, key, value, dropout_p=dropout, is_causal=t_new > 1)
        else:
            mask = causal_mask(t_new, t_total, attention_mask, query.dtype).to(query.device)
            out = F.scaled_dot_product_attention(query, key, value, attn_mask=mask, dropout_p=dropout)
        return self.merge_heads(out), (key, value)
