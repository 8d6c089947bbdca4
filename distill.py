"""Distilling an ensemble into one model (Hinton, Vinyals and Dean 2015, "Distilling the Knowledge in a Neural
Network", section 2): Part 2's --distill.

    python ensemble.py runs/a/multitask.pt runs/b/multitask.pt runs/c/multitask.pt --soft_targets --run_name teach
    python multitask_classifier.py --distill runs/teach/soft-targets.npz ...

`ensemble.py --soft_targets` runs every member on the three training sets and keeps their raw outputs
(soft-targets.npz in the ensemble's run folder: SST logits, the Quora logit, the STS score, per member and
training id). A student trained with --distill FILE learns from the gold labels and from the ensemble's
averaged predictions, softened by a temperature T:

    SST    p_teacher = mean over members of softmax(z_m / T)        (five classes)
    Quora  p_teacher = mean over members of sigmoid(z_m / T)        (P(paraphrase))
    STS    s_teacher = mean over members of their 0-5 scores        (a regression target has no temperature)

and the loss of a batch is (1 - alpha) gold + alpha distillation (losses.DistillationLoss), so that one model
at one model's cost keeps what it can of the ensemble's gain. The targets are matched to the student's
training examples by id; a student trained on other data than its teachers is refused in one line.

Measured (RESULTS.md, "At 3 epochs"): the students gain over the default recipe, but one teacher's targets
teach as well as three teachers' there: the targets are the teachers' outputs on their own training data,
which they fit far better than held-out data (tools/soft_targets.py).
"""
from pathlib import Path

import numpy as np
import torch

from utils import MinbertError, atomic_write

SOFT_TARGETS = "soft-targets.npz"
TASKS = ("sst", "quora", "sts")


def save_soft_targets(path, members, outputs):
    """outputs: {task: (ids, [one raw-output array per member])}; written as one .npz (no pickles)."""
    fields = {"members": np.array([str(m) for m in members])}
    for task, (ids, per_member) in outputs.items():
        fields[f"{task}_ids"] = np.array(ids)
        fields[f"{task}_outputs"] = np.stack([np.asarray(o, dtype=np.float32) for o in per_member])
    atomic_write(path, lambda fp: np.savez_compressed(fp, **fields))
    return path


def teacher_targets(path, train, temperature):
    """{task: tensor of the teacher's target per training example, in the order of `train[task]`'s examples}."""
    path = Path(path)
    if not path.is_file():
        raise MinbertError(f"--distill {path}: file not found (ensemble.py --soft_targets writes it)")
    try:
        with np.load(path, allow_pickle=False) as z:
            data = {k: z[k] for k in z.files}
    except Exception as e:
        raise MinbertError(f"--distill {path}: cannot read soft targets ({type(e).__name__}); ensemble.py "
                           f"--soft_targets writes them") from None
    targets = {}
    for task in TASKS:
        if f"{task}_outputs" not in data:
            raise MinbertError(f"--distill {path}: no {task} soft targets in it (not written by ensemble.py --soft_targets?)")
        ids, out = data[f"{task}_ids"], torch.from_numpy(data[f"{task}_outputs"]).double()
        row = {i: n for n, i in enumerate(ids.tolist())}
        missing = [i for i in train[task].ids if i not in row]
        if missing:
            raise MinbertError(f"--distill {path}: no teacher prediction for {task} training id {missing[0]} (and "
                               f"{len(missing) - 1} more): the ensemble saw other training data than this run")
        out = out[:, [row[i] for i in train[task].ids]]
        if task == "sst":
            target = torch.softmax(out / temperature, dim=-1).mean(0)
        elif task == "quora":
            target = torch.sigmoid(out / temperature).mean(0)
        else:
            target = out.mean(0)
        targets[task] = target.float()
    return targets
