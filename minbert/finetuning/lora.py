"""Low-rank adapters around a frozen nn.Linear: LoRA and DoRA, the pipelines' --fine-tune-mode lora|dora.

LoRA (Hu et al. 2022):  h = W0 x + (alpha / r) B A x,  A: r x in, B: out x r, B = 0 at start,
so step 0 is exactly the base model and only A and B train.

DoRA (Liu et al. 2024, the handout's "LoRA" paragraph):  W' = m * V / ||V||_c  with  V = W0 + (alpha / r) B A.
The handout's W is d x k with inputs along d, so a "column" is one output unit; in nn.Linear's
(out, in) layout that is a row, hence the norm over dim 1. m starts at ||W0||_c (W' = W0 at step 0),
and the norm is detached from backprop, as the paper does to save memory.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F




class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, rank=8, alpha=16.0, dropout=0.0, dora=False):
        super().__init__()
        self.base, self.scaling, self.dora = base, alpha / rank, dora
        for p in base.parameters():
            p.requires_grad = False
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank))
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))  # nn.Linear's own init, as the paper's code
        self.dropout = nn.Dropout(dropout)
        self.magnitude = nn.Parameter(base.weight.detach().norm(dim=1).clone()) if dora else None

    def delta(self):
        """(alpha / r) B A: the update the adapter adds to W0."""
        return self.scaling * (self.lora_B @ self.lora_A)

    def column_norm(self):
        """||W0 + (alpha / r) B A||_c, one per output unit, detached (DoRA section 4.3)."""
        return (self.base.weight + self.delta()).norm(dim=1).detach()

    def forward(self, x):
        lora = F.linear(F.linear(self.dropout(x), self.lora_A), self.lora_B) * self.scaling
        out = F.linear(x, self.base.weight) + lora
        if self.dora:
            out = out * (self.magnitude / self.column_norm())
        return out if self.base.bias is None else out + self.base.bias

    @torch.no_grad()
    def merged(self):
        """A plain nn.Linear computing the same function (no dropout): the adapter folded into W."""
        w = self.base.weight + self.delta()
        if self.dora:
            w = w * (self.magnitude / w.norm(dim=1)).unsqueeze(1)
        lin = nn.Linear(self.base.in_features, self.base.out_features, bias=self.base.bias is not None)
        lin = lin.to(device=w.device, dtype=w.dtype)
        lin.weight.copy_(w)
        if self.base.bias is not None:
            lin.bias.copy_(self.base.bias)
        return lin


# The linears --lora_targets may name: roles of the backbone contract's LAYER_PARTS (bert.py).
TARGETS = ("query", "key", "value", "attention_dense", "interm_dense", "out_dense")


def layer_part(backbone, layer, role):
    """(the module holding `role` in `layer`, its attribute name there), by the backbone's table of its
    layers' parts (LAYER_PARTS: the backbone contract, bert.py)."""
    path = backbone.LAYER_PARTS.get(role)
    if path is None:
        raise ValueError(f"{type(backbone).__name__}'s layers have no {role} (its LAYER_PARTS)")
    parent, _, attr = path.rpartition(".")
    return (layer.get_submodule(parent) if parent else layer), attr


def add_adapters(bert, targets=("query", "value"), rank=8, alpha=16.0, dropout=0.0, dora=False):
    """Freeze every BERT parameter and wrap the targeted linears of each layer; returns the wrappers."""
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        raise ValueError(f"unknown adapter target(s) {unknown}; choose from {', '.join(TARGETS)}")
    if len(set(targets)) < len(targets):  # a linear wrapped twice would wrap its own wrapper
        raise ValueError(f"adapter targets {list(targets)}: each may be named once")
    for p in bert.parameters():
        p.requires_grad = False
    wrapped = []
    for layer in bert.layers:
        for t in targets:
            parent, attr = layer_part(bert, layer, t)
            adapter = LoRALinear(getattr(parent, attr), rank, alpha, dropout, dora)
            setattr(parent, attr, adapter)
            wrapped.append(adapter)
    return wrapped


def merge_adapters(module):
    """Replace every LoRALinear under `module` by its merged nn.Linear; returns how many were merged."""
    n = 0
    for name, child in list(module.named_children()):
        if isinstance(child, LoRALinear):
            setattr(module, name, child.merged())
            n += 1
        else:
            n += merge_adapters(child)
    return n
