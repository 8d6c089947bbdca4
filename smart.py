"""SMART's smoothness-inducing adversarial regulariser (Jiang et al. 2019, "SMART: Robust and Efficient
Fine-Tuning for Pre-trained Natural Language Models through Principled Regularized Optimization";
handout equations 7-10).

    min_theta  L(theta) + lambda_s R_s(theta),
    R_s(theta) = 1/n sum_i  max_{||x~_i - x_i||_inf <= eps}  l_s(f(x~_i; theta), f(x_i; theta))

x_i is the output of BERT's embedding layer. The inner max is approximated as in the paper: start from
x_i plus small Gaussian noise (sigma 1e-5), take `steps` projected ascent steps of size `step_size` along
the gradient of l_s normalised per token (infinity norm), and project back into the eps-ball. l_s is the
symmetric KL divergence (eq. 10) for classifiers (softmax over SST's classes, a Bernoulli for Quora's
logit) and the squared error for regression (STS). The Bregman proximal point step (eq. 11-12, a
momentum teacher) is not implemented.
"""
import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F


def symmetric_kl(p_logits, q_logits):
    """KL(P||Q) + KL(Q||P) for categorical distributions given by logits [..., C], averaged over rows."""
    lp, lq = F.log_softmax(p_logits.float(), -1), F.log_softmax(q_logits.float(), -1)
    return ((lp.exp() - lq.exp()) * (lp - lq)).sum(-1).mean()


def divergence(adv, clean, kind):
    """l_s between perturbed and clean outputs: 'multiclass' logits [B, C], 'binary' logits [B], or
    'regression' scores [B]."""
    if kind == "regression":
        return F.mse_loss(adv.float(), clean.float())
    if kind == "binary":  # a Bernoulli as two-class logits [0, z]
        adv, clean = (torch.stack([torch.zeros_like(x), x], -1) for x in (adv, clean))
    return symmetric_kl(adv, clean)


@contextlib.contextmanager
def perturbed(bert, deltas, noise_std, eps):
    """Within the block, the i-th BERT call adds deltas[i] to its embedding output; a call without a delta
    yet creates one (Gaussian, sigma noise_std, inside the eps-ball), so siamese pairs (two BERT calls)
    get one each."""
    calls = iter(range(10 ** 9))

    def add(x):
        i = next(calls)
        if i == len(deltas):
            deltas.append((torch.randn_like(x, dtype=torch.float32) * noise_std).clamp_(-eps, eps).requires_grad_())
        return x + deltas[i].to(x.dtype)
    bert.perturb = add
    try:
        yield deltas
    finally:
        bert.perturb = None


class SmartRegularizer(nn.Module):
    """lambda_s R_s for one batch. `run()` recomputes the task output of the batch with the model (so the
    perturbation enters through `bert.perturb`); `clean` is that output without perturbation."""

    def __init__(self, weight, eps=1e-5, step_size=1e-3, steps=1, noise_std=1e-5):
        super().__init__()
        self.weight, self.eps, self.step_size, self.steps, self.noise_std = weight, eps, step_size, steps, noise_std

    def forward(self, bert, run, clean, kind):
        deltas, target = [], clean.detach()
        for _ in range(self.steps):  # projected ascent on l_s, with respect to the perturbations only
            with perturbed(bert, deltas, self.noise_std, self.eps):
                adv = run()
            grads = torch.autograd.grad(divergence(adv, target, kind), deltas, allow_unused=True)
            with torch.no_grad():
                for d, g in zip(deltas, grads):
                    if g is not None:
                        d += self.step_size * g / g.abs().amax(-1, keepdim=True).clamp_min(1e-12)
                        d.clamp_(-self.eps, self.eps)  # the projection onto the eps-ball (infinity norm)
        fixed = [d.detach() for d in deltas]
        with perturbed(bert, fixed, self.noise_std, self.eps):
            adv = run()
        return self.weight * divergence(adv, clean, kind)
