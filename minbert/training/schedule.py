"""How the learning rate varies over training steps and over depth.

Over steps (`--scheduler`, `--warmup_ratio`): linear warm-up over the first W optimizer steps, then
constant, linear decay to 0, or cosine decay to 0 (Loshchilov & Hutter 2017) over the remaining ones.
With s the optimizer steps already taken and T their total, the factor on each group's base rate is

    s < W:  (s + 1) / W                       (the first update is not wasted at rate 0)
    s >= W: p = (s - W) / (T - W);  constant 1,  linear 1 - p,  cosine (1 + cos(pi p)) / 2

applied through torch.optim.lr_scheduler.LambdaLR, so its state is saved and
restored like any PyTorch scheduler.

Over depth (`--llrd GAMMA`): layer-wise learning-rate decay (Howard & Ruder 2018; Sun et al. 2019,
"How to Fine-Tune BERT for Text Classification", section 5.3): BERT layer l of L (0 = bottom) trains at
lr * GAMMA^(L - 1 - l), the embeddings at lr * GAMMA^L, the pooler with the top layer, and the task heads
at the full rate (or `--head_lr`). Lower layers hold more general features, so they move less.
"""
import math

import torch
from torch.optim.lr_scheduler import LambdaLR


SCHEDULES = ("constant", "linear", "cosine")


def lr_factor(step, kind, warmup_steps, total_steps):
    """The multiplier on the base learning rate for the update after `step` optimizer steps."""
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if kind == "constant":
        return 1.0
    p = min(1.0, (step - warmup_steps) / max(1, total_steps - warmup_steps))
    if kind == "linear":
        return 1.0 - p
    if kind == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * p))
    raise ValueError(f"unknown schedule {kind!r} (one of {', '.join(SCHEDULES)})")


def make_scheduler(optimizer, kind, warmup_ratio, total_steps):
    """LambdaLR stepped once per optimizer step; warm-up covers `warmup_ratio` of all `total_steps`."""
    warmup = int(round(warmup_ratio * total_steps))
    return LambdaLR(optimizer, lambda step: lr_factor(step, kind, warmup, total_steps))


def lr_factor_tensor(step, kind, warmup_steps, total_steps):
    """lr_factor with the step count a tensor, computed on its device without a host sync (the same formula)."""
    step = step.float()
    warm = (step + 1) / max(1, warmup_steps)
    p = ((step - warmup_steps) / max(1, total_steps - warmup_steps)).clamp(max=1.0)
    after = {"constant": torch.ones_like(p), "linear": 1.0 - p,
             "cosine": 0.5 * (1.0 + torch.cos(math.pi * p))}.get(kind)
    if after is None:
        raise ValueError(f"unknown schedule {kind!r} (one of {', '.join(SCHEDULES)})")
    return torch.where(step < warmup_steps, warm, after)


class DeviceSchedule:
    """The schedule of make_scheduler, kept on the device for a capturable optimizer (AdamW(capturable=True)):
    each group's "lr" becomes a 0-d tensor that `step` rewrites in place from a step-count tensor, so the
    whole update, schedule included, can be recorded once in a CUDA graph and replayed.

    Its state is LambdaLR's (the step count as `last_epoch`), so that a run saved with
    one resumes with the other."""

    def __init__(self, optimizer, kind, warmup_ratio, total_steps, device):
        self.optimizer, self.kind, self.total = optimizer, kind, total_steps
        self.warmup = int(round(warmup_ratio * total_steps))
        self.steps = torch.zeros((), dtype=torch.float32, device=device)
        for g in optimizer.param_groups:
            g.setdefault("initial_lr", float(g["lr"]))  # as LambdaLR keeps it
        self.base = [torch.tensor(g["initial_lr"], device=device) for g in optimizer.param_groups]
        self.lrs = [base.clone() for base in self.base]  # the tensors a recorded step reads, kept for the run
        self._write()

    def _write(self):
        factor = lr_factor_tensor(self.steps, self.kind, self.warmup, self.total)
        for g, base, lr in zip(self.optimizer.param_groups, self.base, self.lrs):
            g["lr"] = lr  # back in place after optimizer.load_state_dict, which puts numbers there
            lr.copy_(base * factor)

    def step(self):
        self.steps.add_(1)
        self._write()

    def state_dict(self):
        n = int(self.steps)
        return {"base_lrs": [float(b) for b in self.base], "last_epoch": n, "_step_count": n + 1,
                "_last_lr": [float(lr) for lr in self.lrs], "lr_lambdas": [None] * len(self.base)}

    def load_state_dict(self, state):
        self.steps.fill_(state["last_epoch"] if "last_epoch" in state else float(state["steps"]))
        self._write()


def layer_depths(backbone):
    """{id(parameter): depth from the top} for a backbone's parameters (the backbone contract: bert.py
    BertModel .layers and .embeddings): layer l of L at L - 1 - l, the embeddings at L, the rest (the pooler,
    a final LayerNorm) at 0. Adapters and PALs inside a layer are that layer's."""
    layers = backbone.layers
    depths = {id(p): 0 for p in backbone.parameters()}
    for i, layer in enumerate(layers):
        depths.update({id(p): len(layers) - 1 - i for p in layer.parameters()})
    for module in backbone.embeddings:
        depths.update({id(p): len(layers) for p in module.parameters()})
    return depths


def param_groups(model, lr, llrd=1.0, head_lr=None, weight_decay=0.0):
    """Optimizer parameter groups, one per learning rate: the backbone's parameters at lr * llrd^depth, the
    rest (task heads) at head_lr (default lr). Only parameters that require grad are included."""
    depths = layer_depths(model.backbone)
    groups = {}
    for p in model.parameters():
        if not p.requires_grad:
            continue
        rate = lr * llrd ** depths[id(p)] if id(p) in depths else (head_lr or lr)
        groups.setdefault(rate, []).append(p)
    return [{"params": ps, "lr": rate, "weight_decay": weight_decay} for rate, ps in
            sorted(groups.items(), key=lambda kv: -kv[0])]
