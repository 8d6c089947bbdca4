"""objectives/rows.py: a batch filled up to a fixed number of rows with copies of its first example, weighted 0,
gives every loss (and so its gradient) of the unfilled batch: Part 1's, each Part 2 task's with every --sts_loss,
MNRL and SimCSE in-batch, R-Drop, SMART, distillation, and GPT-2's language-model loss.

One test runs over every loss the project registers (test_no_loss_the_project_registers_sees_its_filler_rows): it
builds its list from the registries themselves, so a new task, --sts_loss, regulariser or loss weight is covered
without a new test."""
import dataclasses

import pytest
import torch

from gpt2.sonnets import LanguageModelLoss, lm_loss
from minbert.course_data import MULTITASK, TASKS
from minbert.objectives.sentence_losses import STS_LOSSES, MultipleNegativesRankingLoss
from minbert.objectives.losses import ClassificationLoss, MultitaskLoss, TermLoss
from minbert.objectives.rdrop import RDrop
from minbert.objectives.regularizers import Regularizers
from minbert.objectives.rows import row_mean
from minbert.objectives.smart import SmartRegularizer
from minbert.specs import TaskLosses
from minbert.tasks.extra import EXTRA_TASKS
from minbert.tasks.multitask import MultitaskBERT
from tests.checkpoints import multitask_spec, sentiment_model


def filled(batch, rows):
    """`batch` with copies of its first row appended up to `rows`, and the weight saying which rows are real."""
    def grow(v):
        if isinstance(v, dict):
            return {k: grow(x) for k, x in v.items()}
        if torch.is_tensor(v):
            return torch.cat([v, v[:1].expand(rows - len(v), *v.shape[1:])])
        return v
    n = len(batch["labels"])
    return {**grow(batch), "weight": (torch.arange(rows) < n).float()}


def inputs(ids):
    ids = torch.tensor(ids)
    return {"input_ids": ids, "attention_mask": (ids != 0).long(), "token_type_ids": torch.zeros_like(ids)}


def grads(model, loss_fn, batch):
    model.zero_grad(set_to_none=True)
    torch.manual_seed(0)  # SMART's noise
    loss = loss_fn(model, batch)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def assert_same_gradient(model, loss_fn, batch, rows=5):
    loss, g = grads(model, loss_fn, batch)
    loss_filled, g_filled = grads(model, loss_fn, filled(batch, rows))
    torch.testing.assert_close(loss_filled, loss)
    assert g.keys() == g_filled.keys() and g
    for n in g:
        torch.testing.assert_close(g_filled[n], g[n], rtol=1e-4, atol=1e-6)


def test_row_mean_leaves_the_filler_rows_out():
    assert float(row_mean(torch.tensor([1.0, 3.0, 100.0]), torch.tensor([1.0, 1.0, 0.0]))) == 2.0
    assert float(row_mean(torch.tensor([[1.0, 3.0], [5.0, 7.0]]))) == 4.0


def test_mnrl_over_a_mask_is_mnrl_over_the_marked_rows():
    torch.manual_seed(0)
    a, b = torch.randn(5, 8), torch.randn(5, 8)
    mask = torch.tensor([True, False, True, True, False])
    loss = MultipleNegativesRankingLoss(20.0)
    torch.testing.assert_close(loss(a, b, mask), loss(a[mask], b[mask]))
    assert float(loss(a, b, torch.tensor([True, False, False, False, False]))) == 0.0  # no negative: no term


@pytest.mark.parametrize("regularizer, smoothing", [(None, 0.0), ("rdrop", 0.0), ("smart", 0.0), (None, 0.1)])
def test_part1_loss(tiny_model, regularizer, smoothing):
    model = sentiment_model(tiny_model, 0.0)  # no dropout: both batches see the same network
    regs = {"rdrop": {"rdrop": RDrop(1.0)}, "smart": {"smart": SmartRegularizer(1.0, step_size=1e-3)}}
    batch = {"x": inputs([[2, 7, 9, 11, 3, 0], [2, 12, 13, 14, 15, 3], [2, 8, 3, 0, 0, 0]]),
             "labels": torch.tensor([1, 3, 0]), "index": torch.arange(3)}
    assert_same_gradient(model, ClassificationLoss(smoothing, **regs.get(regularizer, {})), batch)


@pytest.mark.parametrize("task, encoding, sts_loss, extra", [
    ("sst", "cross", "mse", {}),
    ("quora", "cross", "mse", {}),
    ("quora", "siamese", "mse", {"mnrl_weight": 1.0}),
    ("sts", "siamese", "mse", {"simcse_weight": 1.0}),
    ("sts", "siamese", "cosine", {}),
    ("sts", "cross", "cosent", {}),
    ("sst", "cross", "mse", {"distill": True}),
    ("sst", "cross", "mse", {"label_smoothing": 0.1}),
    ("quora", "cross", "mse", {"label_smoothing": 0.1}),
])
def test_part2_losses(tiny_model, task, encoding, sts_loss, extra):
    model = MultitaskBERT(multitask_spec(tiny_model, pair_encoding=encoding)).eval()
    a = inputs([[2, 7, 9, 11, 3, 0], [2, 12, 13, 14, 15, 3], [2, 8, 3, 0, 0, 0], [2, 9, 9, 3, 0, 0]])
    b = inputs([[2, 7, 9, 3, 0], [2, 12, 14, 15, 3], [2, 8, 3, 0, 0], [2, 9, 10, 3, 0]])
    labels = {"sst": torch.tensor([1, 3, 0, 4]), "quora": torch.tensor([1, 1, 0, 1]),
              "sts": torch.tensor([4.5, 1.0, 4.0, 2.5])}[task]
    batch = {"task": task, "labels": labels, "index": torch.tensor([0, 2, 1, 3])}
    batch.update({"a": a, "b": b} if task != "sst" and encoding == "siamese" else {"x": a})
    teacher = {"sst": torch.softmax(torch.randn(4, 5), -1)} if extra.pop("distill", False) else None
    loss = MultitaskLoss({"sst": 1.0, "quora": 1.0, "sts": 1.0}, sts_loss, teacher=teacher, **extra)
    assert_same_gradient(model, loss, batch, rows=6)


def test_gpt2_language_model_loss(tiny_gpt2):
    from gpt2.sonnets import SonnetGPT
    model = SonnetGPT(str(tiny_gpt2)).eval()
    ids = torch.tensor([[5, 6, 7, 8, 0], [9, 10, 11, 0, 0]])
    batch = {"x": {"input_ids": ids, "attention_mask": (ids != 0).long()}, "labels": torch.zeros(2)}
    assert_same_gradient(model, lm_loss, batch, rows=4)


# ----------------------------------------------------------------------------- every loss the project registers

def every_weight(spec, value=0.5):
    """`spec` (a settings dataclass) with every loss term it weighs switched on: each field named *_weight at
    `value` (0.5, so that distillation's (1 - alpha) gold + alpha soft keeps both parts)."""
    return spec(**{f.name: value for f in dataclasses.fields(spec) if f.name.endswith("_weight")})


def part2_losses():
    """(task, pair encoding, --sts_loss) of every Part 2 loss: each task of course_data.MULTITASK and
    tasks/extra.EXTRA_TASKS, both encodings of a sentence-pair task, each --sts_loss (STS_LOSSES) for STS."""
    for task in (*MULTITASK, *EXTRA_TASKS):
        for encoding in ("cross", "siamese") if task in ("quora", "sts") else ("cross",):
            for sts_loss in STS_LOSSES if task == "sts" else ("mse",):
                yield pytest.param("multitask", task, encoding, sts_loss, id=f"{task}-{encoding}-{sts_loss}")


LOSSES = [pytest.param("classifier", "sst", "cross", "mse", id="part1"), *part2_losses(),
          pytest.param("gpt2-lm", None, None, None, id="gpt2-language-model")]


def labels_of(task):
    """Four gold labels of `task` of its kind, the first neither the highest nor the lowest (its copies fill
    a batch up, and CoSENT orders pairs): classes in range, scores in range, two positive pairs for MNRL
    (Quora 1, STS >= 4)."""
    spec = TASKS.get(task) or EXTRA_TASKS[task]
    if spec.kind == "regression":
        lo, hi = spec.label_range
        return torch.tensor([0.5, 0.1, 0.9, 0.8]) * (hi - lo) + lo
    if task == "quora":
        return torch.tensor([1, 0, 1, 1])
    return torch.tensor([1, 3, 0, 4]) % spec.num_labels


def rows_batch(task, encoding, gpt2=False):
    """A batch of four real rows of distinct content for `task` (as TaskData.batch builds it), on the tiny
    vocabulary."""
    def inputs(ids):
        ids = torch.tensor(ids)
        x = {"input_ids": ids, "attention_mask": (ids != 0).long()}
        return x if gpt2 else {**x, "token_type_ids": torch.zeros_like(ids)}
    a = inputs([[2, 7, 9, 11, 3, 0], [2, 12, 13, 14, 15, 3], [2, 8, 3, 0, 0, 0], [2, 9, 10, 16, 3, 0]])
    if gpt2:
        return {"x": inputs([[5, 6, 7, 8, 0], [9, 10, 11, 0, 0], [12, 13, 14, 15, 16], [17, 18, 0, 0, 0]]),
                "labels": torch.zeros(4), "index": torch.arange(4)}
    batch = {"task": task, "labels": labels_of(task), "index": torch.tensor([0, 2, 1, 3])}
    if encoding == "siamese":
        return {**batch, "a": a, "b": inputs([[2, 7, 9, 3, 0], [2, 12, 14, 15, 3], [2, 8, 3, 0, 0],
                                              [2, 9, 10, 3, 0]])}
    return {**batch, "x": a}


def filled_with(batch, rows, order):
    """`batch` filled up to `rows` rows with its rows at `order` (positions of its real rows), weighted 0."""
    def grow(v):
        if isinstance(v, dict):
            return {k: grow(x) for k, x in v.items()}
        return torch.cat([v, v[order]]) if torch.is_tensor(v) else v
    n = len(batch["labels"])
    return {**grow(batch), "weight": (torch.arange(n + len(order)) < n).float()}


def build(kind, task, encoding, sts_loss, tiny_model, tiny_gpt2):
    """(a model, a function making the loss on it with every term on, given the regularisers) of one entry of
    LOSSES."""
    if kind == "gpt2-lm":
        from gpt2.sonnets import SonnetGPT
        return SonnetGPT(str(tiny_gpt2)), lambda model, regs: LanguageModelLoss()
    if kind == "classifier":
        model = sentiment_model(tiny_model, 0.1)
        return model, lambda m, regs: ClassificationLoss(**TermLoss.regularizers(regs, m, 10))
    spec = multitask_spec(tiny_model, pair_encoding=encoding if task in ("quora", "sts") else "cross",
                          extra_tasks=[task] if task in EXTRA_TASKS else None)
    g = torch.Generator().manual_seed(5)
    teacher = {"sst": torch.softmax(torch.randn(4, 5, generator=g), -1),
               "quora": torch.rand(4, generator=g), "sts": 5 * torch.rand(4, generator=g)}
    losses = dataclasses.replace(every_weight(TaskLosses), sts_loss=sts_loss,
                                 weights={t: 1.0 for t in MULTITASK})
    return MultitaskBERT(spec), lambda m, regs: MultitaskLoss.from_spec(losses, regs, m, 10, teacher)


def loss_and_grads(model, loss_fn, batch):
    model.zero_grad(set_to_none=True)
    torch.manual_seed(0)  # dropout, SMART's noise: the same draws for batches of one shape
    loss = loss_fn(model, batch)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("kind, task, encoding, sts_loss", LOSSES)
def test_no_loss_the_project_registers_sees_its_filler_rows(kind, task, encoding, sts_loss, tiny_model, request):
    """Every loss term on at once, for every Part 1 and Part 2 loss and GPT-2's: (1) dropout off, the batch
    filled with copies of its first row gives the unfilled batch's loss and gradient (each term averages over
    the real rows); (2) dropout on, filler rows of other content and labels change neither the loss nor the
    gradient, not by a bit (no term reads a filler row: R-Drop's two passes differ, the Bregman teacher's output
    differs, CoSENT's pairs, MNRL's negatives and the distillation targets all see other rows).

    SMART's adversarial term draws its noise at the batch's shape, so in (1) the unfilled batch would draw other
    numbers for a siamese pair's second sentence: there it is off, and (2), on batches of one shape, checks it."""
    tiny_gpt2 = request.getfixturevalue("tiny_gpt2") if kind == "gpt2-lm" else None
    model, make_loss = build(kind, task, encoding, sts_loss, tiny_model, tiny_gpt2)
    regs = every_weight(Regularizers)
    batch = rows_batch(task, encoding, gpt2=kind == "gpt2-lm")
    model.eval()
    loss_fn = make_loss(model, dataclasses.replace(regs, smart_weight=0.0))
    with torch.no_grad():  # a teacher apart from the model, so that the Bregman term is not 0 without dropout
        for buffer in loss_fn.buffers():
            if buffer.is_floating_point():
                buffer.add_(0.05 * torch.randn_like(buffer))
    loss, g = loss_and_grads(model, loss_fn, batch)
    filled_loss, filled_g = loss_and_grads(model, loss_fn, filled_with(batch, 6, [0, 0]))
    assert loss > 0 and g.keys() == filled_g.keys()
    torch.testing.assert_close(filled_loss, loss, rtol=1e-5, atol=1e-6)
    for n in g:
        torch.testing.assert_close(filled_g[n], g[n], rtol=1e-4, atol=1e-6)
    model.train()
    loss_fn = make_loss(model, regs)
    first, first_g = loss_and_grads(model, loss_fn, filled_with(batch, 6, [0, 0]))
    other, other_g = loss_and_grads(model, loss_fn, filled_with(batch, 6, [3, 2]))
    assert torch.equal(first, other), (float(first), float(other))
    assert first_g.keys() == other_g.keys()
    for n in first_g:
        assert torch.equal(first_g[n], other_g[n]), n
