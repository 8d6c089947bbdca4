"""The mean over a batch's rows that every loss takes, with filler rows left out.

A CUDA graph replays one shape, so on the captured path every batch has the same number of rows: a short batch
(the last of a pass) is filled up with copies of its first example whose weight is 0
(datasets.set_fixed_shapes, batch["weight"]). Each loss is then the weighted mean of its per-row values,

    L = sum_i w_i l_i / sum_i w_i,   w_i in {0, 1},

which is the plain mean over the real rows, so its gradient is the unfilled batch's. Without weights (every
other path) a loss is the plain mean, computed exactly as before.
"""
import torch.nn.functional as F


def row_mean(per_row, weight=None):
    """The mean of `per_row` ([B] or [B, ...], averaged over everything after the first dimension)
    over the rows with weight 1."""
    if per_row.dim() > 1:
        per_row = per_row.flatten(1).mean(1)
    if weight is None:
        return per_row.mean()
    weight = weight.to(per_row.dtype)
    return (per_row * weight).sum() / weight.sum()


def cross_entropy(logits, target, weight=None):
    if weight is None:
        return F.cross_entropy(logits, target)
    return row_mean(F.cross_entropy(logits, target, reduction="none"), weight)


def binary_cross_entropy_with_logits(logits, target, weight=None):
    if weight is None:
        return F.binary_cross_entropy_with_logits(logits, target)
    return row_mean(F.binary_cross_entropy_with_logits(logits, target, reduction="none"), weight)


def mse_loss(a, b, weight=None):
    if weight is None:
        return F.mse_loss(a, b)
    return row_mean(F.mse_loss(a, b, reduction="none"), weight)
