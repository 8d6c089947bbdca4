"""The mean over a batch's rows that every loss takes, with filler rows left out.

A recorded training step (training/recorded.py) replays one shape, so there every batch has the same
number of rows: a short batch (the last of a pass) is filled up with copies of its first example whose
weight is 0 (datasets.set_fixed_shapes, batch["weight"]). Each loss is then the weighted mean of its
per-row values,

    L = sum_i w_i l_i / sum_i w_i,   w_i in {0, 1},

which is the plain mean over the real rows, so its gradient is the unfilled batch's. Without weights (the
eager step) a loss is the plain mean, computed exactly as it always was.

Why weights rather than dropping a pass's short batch on both paths: dropping would change every eager run
whose training set is not a multiple of the batch size (up to batch_size - 1 examples unseen per pass, and
other batches after them), so results would no longer be those of RESULTS.md; the weights change nothing on
the eager path. What they cost is that every loss must pass its `weight` on, and a loss that forgot it would
be wrong only on a GPU, only on a pass's last batch. tests/minbert/objectives/test_rows.py guards that once
for all: it builds every loss and term the project registers (each task of course_data.MULTITASK and
tasks/extra.EXTRA_TASKS, each --sts_loss, each regulariser, every weight of specs.TaskLosses, GPT-2's
language-model loss) and checks that filler rows change neither the loss nor its gradient, so a new loss is
covered without a new test.
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


def cross_entropy(logits, target, weight=None, smoothing=0.0):
    """Cross entropy against the label `target`, smoothed (Szegedy et al. 2016, section 7) when `smoothing`
    (epsilon) is above 0: the target distribution is q(k) = (1 - epsilon) [k = y] + epsilon / K over the K
    classes, torch's `label_smoothing`."""
    if weight is None:
        return F.cross_entropy(logits, target, label_smoothing=smoothing)
    return row_mean(F.cross_entropy(logits, target, reduction="none", label_smoothing=smoothing), weight)


def binary_cross_entropy_with_logits(logits, target, weight=None, smoothing=0.0):
    """Binary cross entropy on the logit, the 0/1 target smoothed as cross_entropy's over K = 2 classes:
    y (1 - epsilon) + epsilon / 2."""
    if smoothing:
        target = target * (1 - smoothing) + smoothing / 2
    if weight is None:
        return F.binary_cross_entropy_with_logits(logits, target)
    return row_mean(F.binary_cross_entropy_with_logits(logits, target, reduction="none"), weight)


def mse_loss(a, b, weight=None):
    if weight is None:
        return F.mse_loss(a, b)
    return row_mean(F.mse_loss(a, b, reduction="none"), weight)
