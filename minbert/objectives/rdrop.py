"""R-Drop (Liang et al. 2021, "R-Drop: Regularized Dropout for Neural Networks"),
the pipelines' --rdrop_weight.

Every batch goes through the model twice; the two passes differ only in their dropout masks. The loss is
the task loss averaged over the two passes plus alpha times their disagreement:

    L = 1/2 (l(f_1(x), y) + l(f_2(x), y)) + alpha * 1/2 (KL(P_1 || P_2) + KL(P_2 || P_1))

(the paper sums the two task losses; averaging keeps the task loss on the scale of one pass, so the
learning rate means what it means without R-Drop). Classifiers compare their softmax distributions
(a Bernoulli for Quora's logit); STS, a regression, compares its two scores by squared error.
"""
import torch.nn as nn

from minbert.objectives.smart import divergence
from minbert.flag import Flag

FLAGS = (Flag("rdrop_weight", 0.0, "nonneg_float",
              "R-Drop (minbert/objectives/rdrop.py): each batch twice, the task loss averaged over both "
              "passes plus this weight times their symmetric KL (squared error for STS)"),)


class RDrop(nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.weight = weight

    @classmethod
    def build(cls, spec, model, total_steps):
        return cls(spec.rdrop_weight)

    def forward(self, first, second, kind, weight=None):
        """alpha times the disagreement of two dropout passes' outputs of one batch (`weight`: rows.py)."""
        d = divergence(first, second, kind, weight)
        return self.weight * (0.5 * d if kind != "regression" else d)

    def regularize(self, loss, p):
        """A second pass of the batch `p` (the same batch, other dropout masks): the task loss averaged over
        both passes, and the term (objectives/regularizers.py's protocol)."""
        second = p.forward()
        loss = 0.5 * (loss + p.task_loss(second))
        return loss, self(p.output(p.first), p.output(second), p.kind, p.weight)
