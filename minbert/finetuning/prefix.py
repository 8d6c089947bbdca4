"""Prefix tuning (Li and Liang 2021, "Prefix-Tuning: Optimizing Continuous Prompts for Generation", sections
4.1 to 4.3), the pipelines' --fine-tune-mode prefix.

BERT stays frozen. Every layer's self-attention gets L_p extra keys and values, a trainable prefix that every
token can attend to (and that attends to nothing itself):

    head_i = Attention(x W_q, [P_k; x W_k], [P_v; x W_v]).

Optimising the prefix directly is unstable (section 4.3), so it is reparameterised during training: one
smaller matrix P' (L_p x d) goes through an MLP that writes the keys and values of every layer,

    [P_k, P_v]_layers = MLP(P') = W_2 tanh(W_1 P' + b_1) + b_2,     W_2: h -> 2 L d,

and only P' and the MLP train (with the task heads). Once trained, the MLP's output is all the model needs:
--merge computes it once and keeps it as the prefix (the paper: "we can drop the reparametrization
parameters and only store the prefix"), so inference runs no MLP. The default length is the paper's 10 and
the MLP's hidden size its 512.
"""
import functools

import torch
import torch.nn as nn

from minbert.finetuning.lora import layer_part

DEFAULT_LENGTH, MLP_HIDDEN = 10, 512


class PrefixTuning(nn.Module):
    def __init__(self, config, length=DEFAULT_LENGTH, hidden=MLP_HIDDEN):
        super().__init__()
        self.length, self.layers = length, config.num_hidden_layers
        self.heads = config.num_attention_heads
        self.head_dim = config.hidden_size // config.num_attention_heads
        d = config.hidden_size
        self.prefix = nn.Parameter(torch.randn(length, d) * config.initializer_range)  # P'
        self.mlp = nn.Sequential(nn.Linear(d, hidden), nn.Tanh(), nn.Linear(hidden, 2 * self.layers * d))
        self.register_buffer("folded", None)  # the MLP's output, once --merge has computed it

    def keys_values(self):
        """All layers' prefixes: [layers, 2 (key, value), heads, L_p, head_dim]."""
        kv = self.folded if self.folded is not None else self.mlp(self.prefix)
        return kv.view(self.length, self.layers, 2, self.heads, self.head_dim).permute(1, 2, 3, 0, 4)

    def layer_prefix(self, layer, batch_size, dtype):
        """(P_k, P_v) of one layer for a batch: [B, heads, L_p, head_dim] each."""
        kv = self.keys_values()[layer].to(dtype)
        return (kv[0].unsqueeze(0).expand(batch_size, -1, -1, -1),
                kv[1].unsqueeze(0).expand(batch_size, -1, -1, -1))

    def attach(self, bert):
        """Hand each layer's self-attention its prefix (BertSelfAttention.prefix); the weights stay here."""
        for i, layer in enumerate(bert.layers):
            parent, attr = layer_part(bert, layer, "prefix")
            setattr(parent, attr, functools.partial(self.layer_prefix, i))

    @torch.no_grad()
    def fold(self):
        """--merge: keep the MLP's output as the prefix and drop the reparameterisation."""
        self.folded = self.mlp(self.prefix).detach()
        del self.mlp
        self.prefix.requires_grad = False


def add_prefix(bert, length=DEFAULT_LENGTH):
    """Freeze BERT and attach a trainable prefix to every layer; returns the PrefixTuning module (the model
    keeps it as a submodule, so its weights are saved with the heads')."""
    for p in bert.parameters():
        p.requires_grad = False
    prefix = PrefixTuning(bert.config, length)
    prefix.attach(bert)
    return prefix
