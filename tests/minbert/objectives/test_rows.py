"""objectives/rows.py: a batch filled up to a fixed number of rows with copies of its first example, weighted 0,
gives every loss (and so its gradient) of the unfilled batch: Part 1's, each Part 2 task's with every --sts_loss,
MNRL and SimCSE in-batch, R-Drop, SMART, distillation, and GPT-2's language-model loss."""
import pytest
import torch

from gpt2.sonnets import lm_loss
from minbert.objectives.embedding import MultipleNegativesRankingLoss
from minbert.objectives.losses import ClassificationLoss, MultitaskLoss
from minbert.objectives.rdrop import RDrop
from minbert.objectives.rows import row_mean
from minbert.objectives.smart import SmartRegularizer
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


@pytest.mark.parametrize("regularizer", [None, "rdrop", "smart"])
def test_part1_loss(tiny_model, regularizer):
    model = sentiment_model(tiny_model, 0.0)  # no dropout: both batches see the same network
    regs = {"rdrop": {"rdrop": RDrop(1.0)}, "smart": {"smart": SmartRegularizer(1.0, step_size=1e-3)}}
    batch = {"x": inputs([[2, 7, 9, 11, 3, 0], [2, 12, 13, 14, 15, 3], [2, 8, 3, 0, 0, 0]]),
             "labels": torch.tensor([1, 3, 0]), "index": torch.arange(3)}
    assert_same_gradient(model, ClassificationLoss(**regs.get(regularizer, {})), batch)


@pytest.mark.parametrize("task, encoding, sts_loss, extra", [
    ("sst", "cross", "mse", {}),
    ("quora", "cross", "mse", {}),
    ("quora", "siamese", "mse", {"mnrl_weight": 1.0}),
    ("sts", "siamese", "mse", {"simcse_weight": 1.0}),
    ("sts", "siamese", "cosine", {}),
    ("sts", "cross", "cosent", {}),
    ("sst", "cross", "mse", {"distill": True}),
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
