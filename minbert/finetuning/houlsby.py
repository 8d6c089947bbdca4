"""Bottleneck adapters (Houlsby et al. 2019, "Parameter-Efficient Transfer Learning for NLP", section 2.1 and
figure 2), the pipelines' --fine-tune-mode adapter.

Each transformer layer gets two adapters: one after the attention's output projection, one after the
feed-forward's output projection, each before the residual sum and its LayerNorm. An adapter is a
bottleneck with a skip connection,

    a(y) = y + W_up f(W_down y + b_down) + b_up,      W_down: d -> m,  W_up: m -> d,  m << d,

so the layer computes LN(x + a(W_o h)) where BERT computes LN(x + W_o h). The adapters start near the
identity (weights drawn from N(0, 1e-2^2), truncated at two standard deviations; biases zero), so step 0 is
nearly the pretrained model. Only the adapters, the layers' LayerNorm parameters (the paper trains these too)
and the task heads train: 2 m (2 d + 1) + 2 d parameters a layer.

Unlike LoRA, an adapter cannot be folded into BERT's weights: f (GELU here) sits between its
two projections. --merge is refused for it, naming why; the adapters run at inference as they
are (2 extra small matmuls a layer).
"""
import torch.nn as nn

from minbert.finetuning.lora import layer_part


INIT_STD = 1e-2
DEFAULT_DIM = 64


class HoulsbyAdapter(nn.Module):
    """A frozen nn.Linear (a sub-layer's output projection) followed by a bottleneck adapter with a skip."""

    def __init__(self, base: nn.Linear, dim=DEFAULT_DIM):
        super().__init__()
        self.base = base
        for p in base.parameters():
            p.requires_grad = False
        d = base.out_features
        self.down, self.up = nn.Linear(d, dim), nn.Linear(dim, d)
        self.act = nn.GELU()
        for lin in (self.down, self.up):  # near-identity start
            nn.init.trunc_normal_(lin.weight, std=INIT_STD, a=-2 * INIT_STD, b=2 * INIT_STD)
            nn.init.zeros_(lin.bias)

    def forward(self, x):
        y = self.base(x)
        return y + self.up(self.act(self.down(y)))


def add_houlsby_adapters(bert, dim=DEFAULT_DIM):
    """Freeze BERT, give every layer its two adapters, and let the layers' LayerNorms train; returns the adapters."""
    for p in bert.parameters():
        p.requires_grad = False
    adapters = []
    for layer in bert.layers:
        for role in ("attention_dense", "out_dense"):
            parent, attr = layer_part(bert, layer, role)
            adapter = HoulsbyAdapter(getattr(parent, attr), dim)
            setattr(parent, attr, adapter)
            adapters.append(adapter)
        for role in ("attention_layer_norm", "out_layer_norm"):
            parent, attr = layer_part(bert, layer, role)
            for p in getattr(parent, attr).parameters():
                p.requires_grad = True
    return adapters
