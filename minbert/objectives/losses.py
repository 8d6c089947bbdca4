"""The two pipelines' whole training losses (handout 4 and 5): ClassificationLoss for Part 1, MultitaskLoss
for Part 2. Each adds to every task's own loss what the settings ask for: the sentence-embedding losses
(sentence_losses.py), distillation's soft targets (distill.py), and the regularisers both pipelines share, each a
row of regularizers.py's table. Each term's mean over an epoch goes into the log.
"""
import contextlib

import torch
import torch.nn as nn

from minbert.objectives import rows
from minbert.objectives.distill import DistillationLoss
from minbert.objectives.sentence_losses import STS_LOSSES, MultipleNegativesRankingLoss, SimCSELoss
from minbert.objectives.regularizers import REGULARIZERS, Pass, build_regularizers
from minbert.tasks.extra import EXTRA_TASKS


# How a task's outputs are compared by the consistency terms (smart.divergence).
OUTPUT_KIND = {"sst": "multiclass", "cfimdb": "multiclass", "quora": "binary", "sts": "regression",
               **{name: "multiclass" if t.kind == "class" else "regression" for name,
                  t in EXTRA_TASKS.items()}}


class TermLoss(nn.Module):
    """A training loss made of named terms, each one's mean over the epoch kept for the log (`pop_terms`),
    with the regularisers both pipelines share added by `regularized` (regularizers.py's table, by name:
    `rdrop=RDrop(1.0)`; None is off)."""

    def __init__(self, **regularizers):
        super().__init__()
        unknown = sorted(set(regularizers) - set(REGULARIZERS))
        if unknown:
            raise TypeError(f"unknown regulariser(s) {', '.join(unknown)}; "
                            f"objectives/regularizers.py has {', '.join(REGULARIZERS)}")
        # each one an attribute named as its term, so the loss's state_dict (saved for --resume) says whose
        # state it is ("bregman.teacher_0")
        for name in REGULARIZERS:
            setattr(self, name, regularizers.get(name))
        self.on = [name for name in REGULARIZERS if regularizers.get(name) is not None]  # the table's order
        self.sums, self.counts = {}, {}  # {term: 0-d tensor on the device}, added to in place
        self.silent = False

    @staticmethod
    def regularizers(spec, model, total_steps):
        """{name: module or None} of the regularisers `spec` (a regularizers.Regularizers, or None) switches
        on, for a run of `total_steps` optimizer steps of `model`."""
        return build_regularizers(spec, model, total_steps)

    def track(self, name, value):
        """Add `value` to its term's running sum for the log; returns `value` itself (with its gradient).

        The sum and the count are tensors where the loss is, added to in place: no host sync, and a recorded
        step makes the additions again at every replay (training/recorded.py; its warm-up creates the
        tensors, silently, before anything is recorded)."""
        v = value.detach().float()
        if name not in self.sums:
            self.sums[name] = torch.zeros((), device=v.device)
            self.counts[name] = torch.zeros((), device=v.device)
        if not self.silent:
            self.sums[name].add_(v)
            self.counts[name].add_(1.0)
        return value

    @contextlib.contextmanager
    def quiet(self):
        """Within the block, passes create their terms' sums but add nothing to them (a graph's warm-up)."""
        self.silent = True
        try:
            yield
        finally:
            self.silent = False

    def pop_terms(self):
        """{term: mean over the batches since the last call} (one host sync per term); the sums start
        again at 0, the same tensors."""
        out = {}
        for k, v in self.sums.items():
            total, n = torch.stack([v, self.counts[k]]).tolist()  # sum and count in one read
            if n:
                out[k] = total / n
        for t in (*self.sums.values(), *self.counts.values()):
            t.zero_()
        return out

    def regularized(self, model, forward, first, task_loss, output, kind, weight=None):
        """The task loss of the pass `first` with the regularisers added, in the table's order, each term
        logged under its name. `forward()` runs the batch through the model again; `task_loss(result)` and
        `output(result)` read a pass's loss and its output; `weight` leaves a fixed-shape batch's filler rows
        out (rows.py)."""
        p = Pass(model, forward, first, task_loss, output, kind, weight)
        loss = task_loss(first)
        for name in self.on:
            loss, term = getattr(self, name).regularize(loss, p)
            loss = loss + self.track(name, term)
        return loss

    def after_step(self):
        """After each optimizer step, each regulariser's own after-step (the Bregman teacher follows the model)."""
        for name in self.on:
            after = getattr(getattr(self, name), "after_step", None)
            if after is not None:
                after()


class ClassificationLoss(TermLoss):
    """Part 1: cross entropy on the sentiment logits (its targets smoothed by `label_smoothing`: rows.py), with
    the regularisers asked for."""

    def __init__(self, label_smoothing=0.0, **regularizers):
        super().__init__(**regularizers)
        self.label_smoothing = label_smoothing

    def forward(self, model, batch):
        y, w = batch["labels"], batch.get("weight")
        forward = lambda: model.logits(batch)  # noqa: E731
        eps = self.label_smoothing
        ce = lambda logits: self.track("task", rows.cross_entropy(logits, y, w, eps))  # noqa: E731
        return self.regularized(model, forward, forward(), ce, lambda logits: logits, "multiclass", w)


class MultitaskLoss(TermLoss):
    """Part 2: the weighted loss of a one-task batch, or {task: loss} for a batch holding every task
    (--sampler all). Each task's own loss (cross entropy for SST, binary cross entropy on the logit for
    Quora, for STS MSE on 0-5 or `sts_loss` on the score), plus, when asked: MNRL on the batch's positive
    pairs and SimCSE on its first sentences (sentence embeddings only, not cross-encoded pairs), and the
    regularisers. Every output comes from the model's own `task_forward`. The classification targets (SST,
    Quora, an extra task of classes) are smoothed by `label_smoothing` (rows.py)."""

    def __init__(self, weights, sts_loss="mse", mnrl_weight=0.0, mnrl_scale=20.0, simcse_weight=0.0,
                 teacher=None, distill_weight=0.5, distill_temperature=2.0, label_smoothing=0.0, **regularizers):
        super().__init__(**regularizers)
        self.label_smoothing = label_smoothing
        self.weights = dict(weights)  # a task not in it (an --extra_task) weighs 1
        self.similarity = STS_LOSSES[sts_loss]() if STS_LOSSES[sts_loss] is not None else None
        self.mnrl_weight, self.mnrl = mnrl_weight, MultipleNegativesRankingLoss(mnrl_scale)
        self.simcse_weight, self.simcse = simcse_weight, SimCSELoss()
        # --distill: {task: the teacher's target of every training example} (distill.teacher_targets)
        self.teacher, self.distill_weight = teacher, distill_weight
        self.distillation = DistillationLoss(distill_temperature)

    @classmethod
    def from_spec(cls, losses, regularizers=None, model=None, total_steps=1, teacher=None, label_smoothing=0.0):
        """The loss `losses` (a specs.TaskLosses) asks for, with the `teacher` targets of --distill, and the
        `regularizers` (a regularizers.Regularizers) when a model is given."""
        regs = cls.regularizers(regularizers, model,
                                total_steps) if model is not None and regularizers else {}
        return cls(losses.weights, losses.sts_loss, losses.mnrl_weight, losses.mnrl_scale,
                   losses.simcse_weight, teacher, losses.distill_weight, losses.distill_temperature,
                   label_smoothing, **regs)

    def forward(self, model, batch):
        if "parts" in batch:
            return {task: self.one(model, part) for task, part in batch["parts"].items()}
        return self.one(model, batch)

    def task_loss(self, task, out, y, w=None):
        """`task`'s own loss on one batch's outputs `out` and labels `y` (over the rows of weight 1: rows.py)."""
        eps = self.label_smoothing
        if task in EXTRA_TASKS:
            return (rows.cross_entropy(out.output, y, w, eps) if EXTRA_TASKS[task].kind == "class"
                    else rows.mse_loss(out.output, y, w))
        if task == "sst":
            return rows.cross_entropy(out.output, y, w, eps)
        if task == "quora":
            return rows.binary_cross_entropy_with_logits(out.output, y.float(), w, eps)
        if self.similarity is None:
            return rows.mse_loss(out.output, y, w)
        return self.similarity(out.score, y, w)

    def one(self, model, batch):
        task, y, w = batch["task"], batch["labels"], batch.get("weight")
        forward = lambda: model.task_forward(task, batch)  # noqa: E731
        out = forward()
        extra = 0.0
        if self.mnrl_weight and out.v is not None:
            positive = (y == 1) if task == "quora" else (y >= 4.0)
            if w is not None:
                positive = positive & (w > 0)
            # over the positive pairs (0 where there are fewer than two: one alone has no in-batch negative)
            extra = extra + self.track("mnrl", self.mnrl_weight * self.mnrl(out.u, out.v, positive))
        if self.simcse_weight and out.u is not None:  # the same first sentences again: only dropout differs
            first = batch["a"] if "a" in batch else batch["x"]
            again = model.embed_sentence(first["input_ids"], first["attention_mask"])
            kept = None if w is None else w > 0  # filler rows are no one's negatives
            extra = extra + self.track("simcse", self.simcse_weight * self.simcse(out.u, again, kept))
        # gold, and with --distill the teacher's soft targets too (over both passes of R-Drop)
        def loss_of(o):
            gold = self.track(task, self.task_loss(task, o, y, w))
            if self.teacher is None or task not in self.teacher:
                return gold
            # moved once, then indexed where the batch is
            if self.teacher[task].device != batch["index"].device:
                self.teacher[task] = self.teacher[task].to(batch["index"].device)
            target = self.teacher[task][batch["index"]]
            soft = self.track("distill", self.distillation(task, o.output, target, w))
            return (1 - self.distill_weight) * gold + self.distill_weight * soft
        loss = self.regularized(model, forward, out, loss_of, lambda o: o.output, OUTPUT_KIND[task], w)
        return self.weights.get(task, 1.0) * (loss + extra)
