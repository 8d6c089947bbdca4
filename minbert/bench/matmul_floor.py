"""The least time a training step can take with the matrix kernels this device has (bench.py --profile): the
step's own matrix products timed alone, at its shapes and in its precision, plus its optimizer step alone.

A linear layer y = x W^T + b costs three products of one size in a training step: the forward, the input's
gradient dY W and the weight's gradient dY^T x, 2 * tokens * d_in * d_out FLOPs each; attention adds Q K^T and
P V, three products each (the pooler's and the head's, one row a sentence, are left out). Those products, run
back to back on random operands of each timed batch's shapes in the autocast dtype, and the optimizer's step
over the model's parameters, are work every implementation of the same training step does with the same
library kernels (HF transformers' too). Everything else (elementwise arithmetic, softmax, layer norm, dropout,
dtype casts, Python and autograd's bookkeeping) comes on top. So the floor bounds what any rewrite of
everything else can give: a step cannot run faster than the floor, and no implementation on these kernels is
more than (another step's time / floor) times faster than that other step.
"""
import statistics

import torch

from minbert.bench.timing import seconds
from minbert.precision import AMP_DTYPES


def linear_shapes(cfg):
    """(d_in, d_out) of every linear layer a token passes through, per layer: query, key, value, the attention
    output, the feed-forward's two."""
    H, I = cfg.hidden_size, cfg.intermediate_size
    return [(H, H)] * 4 + [(H, I), (I, H)]


def products(cfg, B, T, dtype, device):
    """{"forward": [(a, b)], "backward": [(a, b)]}: the operands of every matrix product a @ b of a
    training step on a [B, T] batch, random, in `dtype`. Their FLOPs are three times what bench.py
    counts for the forward pass."""
    M, heads = B * T, cfg.num_attention_heads
    d = cfg.hidden_size // heads

    def rand(*shape):
        return torch.randn(*shape, dtype=dtype, device=device)
    out = {"forward": [], "backward": []}
    for d_in, d_out in linear_shapes(cfg) * cfg.num_hidden_layers:
        x, w, dy = rand(M, d_in), rand(d_out, d_in), rand(M, d_out)
        out["forward"].append((x, w.t()))
        out["backward"] += [(dy, w), (dy.t(), x)]  # dX = dY W, dW = dY^T X
    for _ in range(cfg.num_hidden_layers):  # per head: S = Q K^T, O = P V
        q, k, p = rand(B * heads, T, d), rand(B * heads, T, d), rand(B * heads, T, T)
        out["forward"] += [(q, k.transpose(1, 2)), (p, k)]
        # dQ = dS K, dK = dS^T Q, dP = dO V^T, dV = P^T dO
        out["backward"] += [(p, k), (p.transpose(1, 2), q), (q, k.transpose(1, 2)), (p.transpose(1, 2), q)]
    return out


def _multiply(pair):
    return pair[0] @ pair[1]


def step_floor(candidate, cfg, amp, warmup=3):
    """{"forward_ms", "backward_ms", "optimizer_ms", "ms_per_step"}: the mean over `candidate`'s timed batches
    of their matrix products alone (see the module docstring; a mean, as bench.py's ms per step is), and its
    optimizer's step alone (the median of 5)."""
    c, device = candidate, candidate.device
    dtype = AMP_DTYPES[amp] or torch.float32
    forward, backward = [], []
    for i, b in enumerate(c.batches):
        pairs = products(cfg, *b["x"]["input_ids"].shape, dtype, device)
        if i < warmup:
            seconds(device, _multiply, pairs["forward"] + pairs["backward"])
            continue
        forward.append(seconds(device, _multiply, pairs["forward"]))
        backward.append(seconds(device, _multiply, pairs["backward"]))
    for p in c.params:
        p.grad = torch.randn_like(p)
    steps = []
    for i in range(warmup + 5):
        t = seconds(device, lambda _: c.opt.step(), [None])
        if i >= warmup:
            steps.append(t)
    c.opt.zero_grad(set_to_none=True)
    out = {"forward_ms": 1000 * statistics.fmean(forward), "backward_ms": 1000 * statistics.fmean(backward),
           "optimizer_ms": 1000 * statistics.median(steps)}
    out["ms_per_step"] = sum(out.values())
    return out
