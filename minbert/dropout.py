"""Dropout (Srivastava et al. 2014) with its masks drawn in bulk on the CPU.

Inverted dropout, as torch's: y = x * mask / q with mask_i ~ Bernoulli(q), q = 1 - p, so that E[y] = x and
evaluation needs no rescaling. torch's CPU dropout draws one Bernoulli variable per element, which for BERT's
activations costs about as much as a matmul (RESULTS.md, "Speed"). Here one 64-bit draw of torch's generator
gives four independent 16-bit integers u, uniform on 0..65535, and an element is kept where u >= k with k =
round(p 65536): the keep rate is q' = 1 - k / 65536, within 2^-17 of q, and the scale is 1 / q', so E[y] = x
holds exactly. The draws come from torch's own generator, so seeding, the random state a resumed run
restores, and fresh masks at every call are as with torch's dropout. On a GPU, where torch's fused dropout is
already fast, with fast=False (--no_fast_dropout; BertConfig.fast_dropout), and inside torch.compile
(--compile: the compiler draws dropout's randomness inside its own fused kernels, and an in-place draw would
split its graph), torch's dropout runs.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

LEVELS = 1 << 16  # values of one 16-bit draw


def keep_mask(shape, p, device="cpu"):
    """(a bool mask of `shape`, each element kept with probability 1 - round(65536 p) / 65536; that probability)."""
    n = 1
    for s in shape:
        n *= s
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=device).random_(-(1 << 63), (1 << 63) - 1)
    u = words.view(torch.int16)[:n].view(shape)  # four 16-bit draws per word, as signed -32768..32767
    k = round(p * LEVELS)
    return u >= k - LEVELS // 2, 1.0 - k / LEVELS


class Dropout(nn.Dropout):
    """nn.Dropout, with bulk masks on the CPU in training unless `fast` is False (see the module's docstring)."""

    def __init__(self, p=0.5, fast=True):
        super().__init__(p)
        self.fast = fast

    def bulk(self, x):
        """Whether this call draws bulk masks: training on the CPU with 0 < p < 1, outside torch.compile."""
        return (self.fast and self.training and 0.0 < self.p < 1.0 and x.device.type == "cpu"
                and not torch.compiler.is_compiling())

    def forward(self, x):
        if not self.bulk(x):
            return F.dropout(x, self.p, self.training, self.inplace)
        mask, kept = keep_mask(x.shape, self.p, x.device)
        # autograd keeps the bool mask alone for the backward pass (x * mask needs no x
        # there), as torch's dropout does
        return (x * mask).mul_(1.0 / kept)
