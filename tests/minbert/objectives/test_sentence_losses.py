"""objectives/sentence_losses.py by hand: MNRL as cross entropy over a score matrix, SimCSE as MNRL at 1/tau, CoSENT
and the cosine regression loss on hand-made scores."""
import math

import pytest
import torch

from minbert.objectives.sentence_losses import CoSENTLoss, CosineSimilarityLoss, MultipleNegativesRankingLoss, SimCSELoss


def test_mnrl_is_cross_entropy_over_a_3x3_score_matrix():
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    b = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    r = 1 / math.sqrt(2)
    cos = [[1, r, 0], [0, r, 1], [r, 1, r]]  # cos(a_i, b_j), by hand
    expected = 0.0
    for i in range(3):
        s = [20 * c for c in cos[i]]
        expected += -(s[i] - math.log(sum(math.exp(x) for x in s)))
    assert MultipleNegativesRankingLoss(20.0)(a, b).item() == pytest.approx(expected / 3, rel=1e-5)


def test_simcse_is_mnrl_at_one_over_tau():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g)
    assert SimCSELoss(0.05)(a, b).item() == pytest.approx(MultipleNegativesRankingLoss(20.0)(a, b).item())


def test_cosent_on_hand_made_scores():
    scores, gold = torch.tensor([0.9, 0.2, 0.5]), torch.tensor([5.0, 1.0, 3.0])
    # ordered pairs (i above j): (0,1), (0,2), (2,1): terms exp(20 (s_j - s_i))
    terms = [20 * (0.2 - 0.9), 20 * (0.5 - 0.9), 20 * (0.2 - 0.5)]
    expected = math.log(1 + sum(math.exp(t) for t in terms))
    assert CoSENTLoss()(scores, gold).item() == pytest.approx(expected, rel=1e-4)
    wrong = CoSENTLoss()(torch.tensor([0.2, 0.9, 0.5]), gold).item()
    assert wrong > 10 * expected  # the wrong order costs far more
    assert CoSENTLoss()(scores, torch.tensor([2.0, 2.0, 2.0])).item() == 0.0  # ties: nothing to order


def test_cosine_loss_on_hand_made_scores():
    loss = CosineSimilarityLoss()(torch.tensor([1.0, 0.0]), torch.tensor([5.0, 2.5]))
    assert loss.item() == pytest.approx((0.0 ** 2 + 0.5 ** 2) / 2)
