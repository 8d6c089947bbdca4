"""Sentence-embedding losses for Part 2 (handout 5.3), one nn.Module each.

Similarity regression (--sts_loss), on s = cos(u, v) for siamese pairs (the model's score / 5 for
cross-encoded ones) against the gold score y on 0..5:
  - CosineSimilarityLoss: (s - y / 5)^2, Sentence-BERT's regression objective (Reimers & Gurevych 2019).
  - CoSENTLoss: log(1 + sum over pairs (i, j) of the batch with y_i > y_j of exp(lambda (s_j - s_i))),
    lambda = 20 (Su 2022, "CoSENT"): only the order of the scores is trained, not their values.
  (--sts_loss mse, the default, is the squared error of the model's 0-5 output itself.)

In-batch contrastive losses, on the siamese sentence embeddings:
  - MultipleNegativesRankingLoss: -1/K sum_i [S(a_i, b_i) - log sum_j exp S(a_i, b_j)], S = scale * cos,
    scale 20 (Henderson et al. 2017; the handout's equation 9): b_i is a_i's positive, every other b_j
    in the batch a negative.
  - SimCSELoss: the same cross-entropy with S = cos / tau, tau = 0.05, between two encodings of the same
    sentences that differ only in their dropout masks (Gao et al. 2021, unsupervised SimCSE, eq. 1).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

from minbert.objectives.rows import mse_loss


def cosine_matrix(a, b):
    """cos(a_i, b_j) for every i, j: [K, K]."""
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T


class CosineSimilarityLoss(nn.Module):
    def forward(self, scores, gold, weight=None):
        return mse_loss(scores, gold / 5.0, weight)


class CoSENTLoss(nn.Module):
    def __init__(self, scale=20.0):
        super().__init__()
        self.scale = scale

    def forward(self, scores, gold, weight=None):
        diff = self.scale * (scores[None, :] - scores[:, None])  # [i, j] = lambda (s_j - s_i)
        wrong_way = gold[:, None] > gold[None, :]  # pairs where i should score above j
        if weight is not None:  # filler rows (rows.py) are in no pair
            wrong_way = wrong_way & (weight[:, None] > 0) & (weight[None, :] > 0)
        diff = diff.masked_fill(~wrong_way, float("-inf"))
        # log(1 + sum exp(.)) = logsumexp over [0, the terms]; a batch with no ordered pair costs 0
        return torch.logsumexp(torch.cat([diff.new_zeros(1), diff.flatten()]), dim=0)


class MultipleNegativesRankingLoss(nn.Module):
    def __init__(self, scale=20.0):
        super().__init__()
        self.scale = scale

    def forward(self, anchors, positives, mask=None):
        """The loss over the pairs (anchors[i], positives[i]); with a bool `mask` [B], over the pairs it marks
        only, each row's negatives the other marked rows (the same as indexing both by the mask, without a
        shape that depends on the data, so no host sync): 0 where fewer than two are marked."""
        scores = self.scale * cosine_matrix(anchors, positives)
        target = torch.arange(len(scores), device=scores.device)
        if mask is None:
            return F.cross_entropy(scores, target)
        # a finite fill, not -inf: an unmarked row's cross-entropy must stay a number (it is weighted 0)
        scores = scores.float().masked_fill(~mask[None, :], -1e4)
        per_row = F.cross_entropy(scores, target, reduction="none")
        kept = mask.float()
        n = kept.sum()
        return (per_row * kept).sum() / n.clamp(min=1.0) * (n >= 2).float()


class SimCSELoss(MultipleNegativesRankingLoss):
    def __init__(self, temperature=0.05):
        super().__init__(scale=1.0 / temperature)


# The losses --sts_loss names (None: MSE on the 0-5 output); the flag's choices are this table's keys.
STS_LOSSES = {"mse": None, "cosine": CosineSimilarityLoss, "cosent": CoSENTLoss}
