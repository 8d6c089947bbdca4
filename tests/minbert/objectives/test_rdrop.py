"""objectives/rdrop.py: R-Drop is the disagreement of two dropout passes (zero without dropout), squared error for
regression."""
import pytest
import torch

from minbert.objectives.losses import ClassificationLoss
from minbert.objectives.rdrop import RDrop
from tests.helpers import sentiment_batch, sentiment_model


def test_rdrop_is_zero_without_dropout_and_positive_with_it(tiny_model):
    for dropout, positive in ((0.0, False), (0.3, True)):
        model = sentiment_model(tiny_model, dropout)
        loss = ClassificationLoss(rdrop=RDrop(1.0))
        torch.manual_seed(0)
        loss(model, sentiment_batch())
        term = loss.pop_terms()["rdrop"]
        assert (term > 1e-6) if positive else term == pytest.approx(0.0, abs=1e-12)
    assert RDrop(2.0)(torch.tensor([1.0, 3.0]), torch.tensor([2.0, 1.0]), "regression").item() == pytest.approx(5.0)
