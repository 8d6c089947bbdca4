"""Distilling an ensemble into one model (Hinton, Vinyals and Dean 2015, "Distilling the Knowledge in a Neural
Network", section 2): Part 2's --distill.

    python ensemble.py runs/a/multitask.pt runs/b/multitask.pt runs/c/multitask.pt --soft_targets --run_name
    teach python multitask_classifier.py --distill runs/teach/soft-targets.npz ...

`ensemble.py --soft_targets` runs every member on the three training sets and keeps their raw outputs
(soft-targets.npz in the ensemble's run folder: SST logits, the Quora logit, the STS score, per member and
training id). A student trained with --distill FILE learns from the gold labels and from the ensemble's
averaged predictions, softened by a temperature T:

    SST    p_teacher = mean over members of softmax(z_m / T)        (five classes)
    Quora  p_teacher = mean over members of sigmoid(z_m / T)        (P(paraphrase))
    STS    s_teacher = mean over members of their 0-5 scores        (a regression target has no temperature)

and the loss of a batch is (1 - alpha) gold + alpha distillation (DistillationLoss below: T^2 KL(p_teacher ||
softmax(z / T)) for SST, T^2 times the binary cross-entropy of sigmoid(z / T) against p_teacher for Quora, the
binary KL up to the teacher's entropy, a constant; (s - s_teacher)^2 for STS; the T^2 keeps the soft term's
gradient on the scale of the hard one as T changes), so that one model at one model's cost keeps what it can
of the ensemble's gain. The targets are matched to the student's
training examples by id; a student trained on other data than its teachers is refused in one line.

Measured (RESULTS.md, "At 3 epochs"): the students gain over the default recipe, but one teacher's targets
teach as well as three teachers' there: the targets are the teachers' outputs on their own training data,
which they fit far better than held-out data (tools/soft_targets.py).

Cross-fitted targets (--fold I/K). Hinton et al. distil on a transfer set, data the teacher was not fitted to.
With no unlabelled data at hand, the training set can serve as its own transfer set by cross-fitting: K
teachers, teacher I trained without fold I of every training set (`multitask_classifier.py --fold I/K`), and
each training example's target taken only from the teachers that did not see it:

    target(x) = mean over the members m with x in fold(m) of p_m(x)          fold(x) = sha256(id) mod K + 1

    for I in 1 2 3; do python multitask_classifier.py --fold $I/3 --run_name cf$I ...; done
    python ensemble.py runs/cf1/multitask.pt runs/cf2/multitask.pt runs/cf3/multitask.pt --soft_targets
    --run_name cf python multitask_classifier.py --distill runs/cf/soft-targets.npz ...

A fold is a hash of the example's id, so every run and every machine splits the data alike.
"""
import hashlib
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from minbert.cli import MinbertError
from minbert.files import atomic_write, require_file
from minbert.objectives.rows import binary_cross_entropy_with_logits, mse_loss, row_mean

SOFT_TARGETS = "soft-targets.npz"
TASKS = ("sst", "quora", "sts")


def fold_of(example_id, folds):
    """The fold (1..folds) of a training example, from a hash of its id: the same in every run, whatever the
    file's order (Python's own hash() of a string changes from one process to the next)."""
    return int.from_bytes(hashlib.sha256(str(example_id).encode()).digest()[:8], "big") % folds + 1


def outside_fold(fold):
    """The training-example filter of --fold I/K: keeps the examples that are not in fold I (None: keeps all)."""
    if not fold:
        return None
    held_out, folds = fold
    return lambda example: fold_of(example.id, folds) != held_out


def held_out_weights(member_folds, ids):
    """[members x examples] 1.0 where the member did not train on the example. `member_folds` is each member's
    --fold (I, K), or None for a member trained on everything; the K folds of one split must all be there, so
    that every example has a teacher that did not see it."""
    if not any(member_folds):
        return None
    if not all(member_folds):
        plain = member_folds.index(None) + 1
        raise MinbertError(f"--soft_targets: member {plain} was trained on every training example and others "
                           "with --fold; cross-fitted targets need every member trained with --fold I/K")
    ks = {k for _, k in member_folds}
    if len(ks) > 1:
        raise MinbertError("--soft_targets: the members were trained with --fold of "
                           f"{' and '.join(map(str, sorted(ks)))} folds; give the members of one K")
    k = ks.pop()
    missing = sorted(set(range(1, k + 1)) - {i for i, _ in member_folds})
    if missing:
        raise MinbertError(f"--soft_targets: no member was trained with --fold {missing[0]}/{k}, so fold "
                           f"{missing[0]}'s examples have no teacher that "
                           "did not see them; give one member per fold")
    folds = np.array([fold_of(i, k) for i in ids])
    return np.stack([(folds == i).astype(np.float32) for i, _ in member_folds])


def save_soft_targets(path, members, outputs, member_folds=None):
    """outputs: {task: (ids, [one raw-output array per member])}; written as one .npz (no pickles). With
    members trained on folds (`member_folds`, each member's --fold), `{task}_weights` marks each
    member's held-out examples."""
    fields = {"members": np.array([str(m) for m in members])}
    for task, (ids, per_member) in outputs.items():
        fields[f"{task}_ids"] = np.array(ids)
        fields[f"{task}_outputs"] = np.stack([np.asarray(o, dtype=np.float32) for o in per_member])
        weights = held_out_weights(list(member_folds or [None] * len(per_member)), ids)
        if weights is not None:
            fields[f"{task}_weights"] = weights
    atomic_write(path, lambda fp: np.savez_compressed(fp, **fields))
    return path


def teacher_targets(path, train, temperature, flag="--distill"):
    """{task: tensor of the teacher's target per training example, in the order of `train[task]`'s examples}.
    `flag` names where the path came from in a message ("" for a positional argument)."""
    path = Path(path)
    where = f"{flag} {path}" if flag else str(path)
    require_file(path, where, "file", "ensemble.py --soft_targets writes it")
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except Exception:  # np.load's own text for a text file advises allow_pickle, which runs code: not quoted
        raise MinbertError(f"{where}: cannot read soft targets: not a NumPy .npz archive (damaged, or another "
                           "kind of file); ensemble.py --soft_targets writes them") from None
    targets = {}
    for task in TASKS:
        if f"{task}_outputs" not in data:
            raise MinbertError(f"{where}: no {task} soft targets in it (not "
                               "written by ensemble.py --soft_targets?)")
        ids, out = data[f"{task}_ids"], torch.from_numpy(data[f"{task}_outputs"]).double()
        row = {i: n for n, i in enumerate(ids.tolist())}
        missing = [i for i in train[task].ids if i not in row]
        if missing:
            raise MinbertError(f"{where}: no teacher prediction for {task} training id {missing[0]} (and "
                               f"{len(missing) - 1} more): the ensemble saw other training data than the "
                               "data given here (--data_dir)")
        order = [row[i] for i in train[task].ids]
        out = out[:, order]
        # Each member's say in an example's target: all members alike, or (cross-fitted)
        # only those that did not see it.
        w = torch.ones(out.shape[:2], dtype=torch.float64)
        if f"{task}_weights" in data:
            w = torch.from_numpy(data[f"{task}_weights"]).double()[:, order]
            unseen = (w.sum(0) <= 0).nonzero().flatten()
            if len(unseen):
                raise MinbertError(f"{where}: {task} training id {train[task].ids[unseen[0]]} has no teacher "
                                   f"that did not train on it")
        w = w / w.sum(0)
        if task == "sst":
            target = (w[..., None] * torch.softmax(out / temperature, dim=-1)).sum(0)
        elif task == "quora":
            target = (w * torch.sigmoid(out / temperature)).sum(0)
        else:
            target = (w * out).sum(0)
        targets[task] = target.float()
    return targets


class DistillationLoss(nn.Module):
    def __init__(self, temperature=2.0):
        super().__init__()
        self.temperature = temperature

    def forward(self, task, student, teacher, weight=None):
        """The soft-target loss of one batch, over its rows of weight 1 when `weight` is given (rows.py)."""
        T = self.temperature
        if task == "sst":
            log_p = F.log_softmax(student.float() / T, dim=-1)
            if weight is None:
                return T * T * F.kl_div(log_p, teacher, reduction="batchmean")
            return T * T * row_mean(F.kl_div(log_p, teacher, reduction="none").sum(-1), weight)
        if task == "quora":
            return T * T * binary_cross_entropy_with_logits(student.float() / T, teacher, weight)
        return mse_loss(student.float(), teacher, weight)
