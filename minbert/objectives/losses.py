"""The training losses: sentence-embedding losses for Part 2 (handout 5.3), one nn.Module each, and the
two pipelines' whole training losses (ClassificationLoss for Part 1, MultitaskLoss for Part 2), which add
them and the regularisers to each task's own loss.

Similarity regression (--sts_loss), on s = cos(u, v) for siamese pairs (the model's score / 5 for
cross-encoded ones) against the gold score y on 0..5:
  - CosineSimilarityLoss: (s - y / 5)^2, Sentence-BERT's regression objective (Reimers & Gurevych 2019).
  - CoSENTLoss: log(1 + sum over pairs (i, j) of the batch with y_i > y_j of exp(lambda (s_j - s_i))),
    lambda = 20 (Su 2022, "CoSENT"): only the order of the scores is trained, not their values.

In-batch contrastive losses, on the siamese sentence embeddings:
  - MultipleNegativesRankingLoss: -1/K sum_i [S(a_i, b_i) - log sum_j exp S(a_i, b_j)], S = scale * cos,
    scale 20 (Henderson et al. 2017; the handout's equation 9): b_i is a_i's positive, every other b_j
    in the batch a negative.
  - SimCSELoss: the same cross-entropy with S = cos / tau, tau = 0.05, between two encodings of the same
    sentences that differ only in their dropout masks (Gao et al. 2021, unsupervised SimCSE, eq. 1).

Knowledge distillation (--distill, distill.py):
  - DistillationLoss: the student's outputs against an ensemble's soft targets (Hinton et al. 2015, section 2):
    T^2 KL(p_teacher || softmax(z / T)) for SST, T^2 times the binary cross-entropy of sigmoid(z / T) against
    p_teacher for Quora (the binary KL up to the teacher's entropy, a constant), (s - s_teacher)^2 for STS. The
    T^2 keeps the soft term's gradient on the scale of the hard one as T changes.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from extra_tasks import EXTRA_TASKS


def cosine_matrix(a, b):
    """cos(a_i, b_j) for every i, j: [K, K]."""
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T


class CosineSimilarityLoss(nn.Module):
    def forward(self, scores, gold):
        return F.mse_loss(scores, gold / 5.0)


class CoSENTLoss(nn.Module):
    def __init__(self, scale=20.0):
        super().__init__()
        self.scale = scale

    def forward(self, scores, gold):
        diff = self.scale * (scores[None, :] - scores[:, None])  # [i, j] = lambda (s_j - s_i)
        wrong_way = gold[:, None] > gold[None, :]  # pairs where i should score above j
        diff = diff.masked_fill(~wrong_way, float("-inf"))
        # log(1 + sum exp(.)) = logsumexp over [0, the terms]; a batch with no ordered pair costs 0
        return torch.logsumexp(torch.cat([diff.new_zeros(1), diff.flatten()]), dim=0)


class MultipleNegativesRankingLoss(nn.Module):
    def __init__(self, scale=20.0):
        super().__init__()
        self.scale = scale

    def forward(self, anchors, positives):
        scores = self.scale * cosine_matrix(anchors, positives)
        return F.cross_entropy(scores, torch.arange(len(scores), device=scores.device))


class SimCSELoss(MultipleNegativesRankingLoss):
    def __init__(self, temperature=0.05):
        super().__init__(scale=1.0 / temperature)


class DistillationLoss(nn.Module):
    def __init__(self, temperature=2.0):
        super().__init__()
        self.temperature = temperature

    def forward(self, task, student, teacher):
        T = self.temperature
        if task == "sst":
            log_p = F.log_softmax(student.float() / T, dim=-1)
            return T * T * F.kl_div(log_p, teacher, reduction="batchmean")
        if task == "quora":
            return T * T * F.binary_cross_entropy_with_logits(student.float() / T, teacher)
        return F.mse_loss(student.float(), teacher)


# ----------------------------------------------------------------------------- the pipelines' training losses

# How a task's outputs are compared by the consistency terms (smart.divergence).
OUTPUT_KIND = {"sst": "multiclass", "cfimdb": "multiclass", "quora": "binary", "sts": "regression",
               **{name: "multiclass" if t.kind == "class" else "regression" for name, t in EXTRA_TASKS.items()}}


class TermLoss(nn.Module):
    """A training loss made of named terms, each one's mean over the epoch kept for the log (`pop_terms`),
    with the regularisers both pipelines share added by `regularized`: R-Drop (rdrop.py), SMART's
    adversarial term and its Bregman proximal point step (smart.py)."""

    def __init__(self, rdrop=None, smart=None, bregman=None):
        super().__init__()
        self.rdrop, self.smart, self.bregman = rdrop, smart, bregman
        self.sums, self.counts = {}, {}

    @staticmethod
    def regularizers(args, model, total_steps):
        """The regularisers the flags ask for: --rdrop_weight, --smart_weight (and its --smart_* settings),
        --smart_bregman_weight over a run of `total_steps` optimizer steps."""
        from rdrop import RDrop
        from smart import BregmanProximal, SmartRegularizer
        return {"rdrop": RDrop(args.rdrop_weight) if args.rdrop_weight else None,
                "smart": SmartRegularizer(args.smart_weight, args.smart_step, args.smart_steps, args.smart_noise,
                                          args.smart_projection, args.smart_eps, args.smart_dropout)
                if args.smart_weight else None,
                "bregman": BregmanProximal(model, args.smart_bregman_weight, args.smart_momentum, total_steps)
                if args.smart_bregman_weight else None}

    def track(self, name, value):
        """Keep `value`'s running sum for the log; returns `value` itself (with its gradient)."""
        v = value.detach().float()
        self.sums[name] = self.sums.get(name, 0.0) + v
        self.counts[name] = self.counts.get(name, 0) + 1
        return value

    def pop_terms(self):
        """{term: mean over the batches since the last call} (one host sync per term)."""
        out = {k: float(v) / self.counts[k] for k, v in self.sums.items()}
        self.sums, self.counts = {}, {}
        return out

    def regularized(self, model, forward, first, task_loss, output, kind):
        """The task loss of the pass `first` with the regularisers added. `forward()` runs the batch through
        the model again; `task_loss(result)` and `output(result)` read a pass's loss and its output."""
        loss = task_loss(first)
        if self.rdrop is not None:  # a second pass: the same batch, other dropout masks
            second = forward()
            loss = 0.5 * (loss + task_loss(second))
            loss = loss + self.track("rdrop", self.rdrop(output(first), output(second), kind))
        rerun = lambda: output(forward())  # noqa: E731
        if self.smart is not None:
            loss = loss + self.track("smart", self.smart(model, model.bert, rerun, output(first), kind))
        if self.bregman is not None:
            loss = loss + self.track("bregman", self.bregman(model, rerun, output(first), kind))
        return loss

    def after_step(self):
        """After each optimizer step: the Bregman teacher follows the model."""
        if self.bregman is not None:
            self.bregman.update()


class ClassificationLoss(TermLoss):
    """Part 1: cross entropy on the sentiment logits, with the regularisers asked for."""

    def forward(self, model, batch):
        y = batch["labels"]
        forward = lambda: model.logits(batch)  # noqa: E731
        ce = lambda logits: self.track("task", F.cross_entropy(logits, y))  # noqa: E731
        return self.regularized(model, forward, forward(), ce, lambda logits: logits, "multiclass")


class MultitaskLoss(TermLoss):
    """Part 2: the weighted loss of a one-task batch, or {task: loss} for a batch holding every task
    (--sampler all). Each task's own loss (cross entropy for SST, binary cross entropy on the logit for
    Quora, for STS MSE on 0-5 or `sts_loss` on the score), plus, when asked: MNRL on the batch's positive
    pairs and SimCSE on its first sentences (sentence embeddings only, not cross-encoded pairs), and the
    regularisers. Every output comes from the model's own `task_forward`."""

    def __init__(self, weights, sts_loss="mse", mnrl_weight=0.0, mnrl_scale=20.0, simcse_weight=0.0, teacher=None,
                 distill_weight=0.5, distill_temperature=2.0, **regularizers):
        super().__init__(**regularizers)
        self.weights = dict(weights)  # a task not in it (an --extra_task) weighs 1
        self.similarity = {"cosine": CosineSimilarityLoss(), "cosent": CoSENTLoss()}.get(sts_loss)
        self.mnrl_weight, self.mnrl = mnrl_weight, MultipleNegativesRankingLoss(mnrl_scale)
        self.simcse_weight, self.simcse = simcse_weight, SimCSELoss()
        # --distill: {task: the teacher's target of every training example} (distill.teacher_targets)
        self.teacher, self.distill_weight = teacher, distill_weight
        self.distillation = DistillationLoss(distill_temperature)

    @classmethod
    def from_args(cls, args, model=None, total_steps=1, teacher=None):
        """The loss multitask_classifier.py's flags ask for (--loss_weights, --sts_loss, --mnrl_*, --simcse_weight,
        --distill's weight and temperature with the `teacher` targets, and the regularisers when a model is given)."""
        regs = cls.regularizers(args, model, total_steps) if model is not None else {}
        return cls(dict(zip(("sst", "quora", "sts"), args.loss_weights)), args.sts_loss, args.mnrl_weight,
                   args.mnrl_scale, args.simcse_weight, teacher, args.distill_weight, args.distill_temperature, **regs)

    def forward(self, model, batch):
        if "parts" in batch:
            return {task: self.one(model, part) for task, part in batch["parts"].items()}
        return self.one(model, batch)

    def task_loss(self, task, out, y):
        if task in EXTRA_TASKS:
            return F.cross_entropy(out.output, y) if EXTRA_TASKS[task].kind == "class" else F.mse_loss(out.output, y)
        if task == "sst":
            return F.cross_entropy(out.output, y)
        if task == "quora":
            return F.binary_cross_entropy_with_logits(out.output, y.float())
        return F.mse_loss(out.output, y) if self.similarity is None else self.similarity(out.score, y)

    def one(self, model, batch):
        task, y = batch["task"], batch["labels"]
        forward = lambda: model.task_forward(task, batch)  # noqa: E731
        out = forward()
        extra = 0.0
        if self.mnrl_weight and out.v is not None:
            positive = (y == 1) if task == "quora" else (y >= 4.0)
            if int(positive.sum()) >= 2:  # one positive alone has no in-batch negative
                extra = extra + self.track("mnrl", self.mnrl_weight * self.mnrl(out.u[positive], out.v[positive]))
        if self.simcse_weight and out.u is not None:  # the same first sentences again: only dropout differs
            first = batch["a"] if "a" in batch else batch["x"]
            again = model.embed_sentence(first["input_ids"], first["attention_mask"])
            extra = extra + self.track("simcse", self.simcse_weight * self.simcse(out.u, again))
        def loss_of(o):  # gold, and with --distill the teacher's soft targets too (over both passes of R-Drop)
            gold = self.track(task, self.task_loss(task, o, y))
            if self.teacher is None or task not in self.teacher:
                return gold
            target = self.teacher[task][batch["index"]].to(o.output.device)
            soft = self.track("distill", self.distillation(task, o.output, target))
            return (1 - self.distill_weight) * gold + self.distill_weight * soft
        loss = self.regularized(model, forward, out, loss_of, lambda o: o.output, OUTPUT_KIND[task])
        return self.weights.get(task, 1.0) * (loss + extra)
