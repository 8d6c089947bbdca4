"""objectives/rdrop.py: R-Drop is the disagreement of two dropout passes (zero without dropout), squared error for
regression."""
import pytest
import torch

from minbert.objectives.losses import ClassificationLoss
from minbert.objectives.rdrop import RDrop
from tests.checkpoints import sentiment_batch, sentiment_model


def test_rdrop_is_zero_without_dropout_and_positive_with_it(tiny_model):
    for dropout, positive in ((0.0, False), (0.3, True)):
        model = sentiment_model(tiny_model, dropout)
        loss = ClassificationLoss(rdrop=RDrop(1.0))
        torch.manual_seed(0)
        loss(model, sentiment_batch())
        term = loss.pop_terms()["rdrop"]
        assert (term > 1e-6) if positive else term == pytest.approx(0.0, abs=1e-12)
    assert RDrop(2.0)(torch.tensor([1.0, 3.0]), torch.tensor([2.0, 1.0]), "regression").item() == pytest.approx(5.0)


def _kl(p, q):
    """KL(P||Q) of two probability vectors, written out element by element."""
    return sum(pi * (torch.log(pi) - torch.log(qi)) for pi, qi in zip(p, q))


def test_multiclass_and_binary_terms_are_half_the_symmetric_kl_averaged_over_rows():
    """Pins the factor 1/2 and the reduction: a mean over rows of the per-row symmetric KL (not a sum over
    the batch, and not a mean over rows times classes)."""
    first = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 0.5], [-3.0, 1.0, 2.0]])
    second = torch.tensor([[0.0, 1.0, 0.0], [1.5, -0.5, 0.0], [-3.0, 1.0, 2.0]])  # row 3 agrees: its term is 0
    rows = [_kl(p, q) + _kl(q, p) for p, q in zip(first.softmax(-1), second.softmax(-1))]
    assert rows[2].item() == pytest.approx(0.0, abs=1e-7) and min(rows[:2]) > 0.05
    expected = 3.0 * 0.5 * sum(rows) / 3
    assert RDrop(3.0)(first, second, "multiclass").item() == pytest.approx(expected.item(), rel=1e-5)
    # a Bernoulli per row for Quora's logit: P(yes) = sigmoid(z)
    za, zb = torch.tensor([1.0, -2.0, 0.0, 3.0]), torch.tensor([0.0, -1.0, 2.0, 3.0])
    bern = [torch.stack([1 - torch.sigmoid(z), torch.sigmoid(z)]) for z in (za, zb)]
    rows = [_kl(p, q) + _kl(q, p) for p, q in zip(bern[0].T, bern[1].T)]
    expected = 2.0 * 0.5 * sum(rows) / 4
    assert RDrop(2.0)(za, zb, "binary").item() == pytest.approx(expected.item(), rel=1e-5)
