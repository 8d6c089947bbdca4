"""SMART (Jiang et al. 2020, "SMART: Robust and Efficient Fine-Tuning for Pre-trained Natural Language Models
through Principled Regularized Optimization"; handout equations 7-12): its two parts, each one module.

1. SmartRegularizer, smoothness-inducing adversarial regularisation (eq. 7-10):

       min_theta  L(theta) + lambda_s R_s(theta),
       R_s(theta) = 1/n sum_i  max_{x~_i near x_i}  l_s(f(x~_i; theta), f(x_i; theta))

   x_i is the output of BERT's embedding layer. The inner max is approximated as the authors' reference
   code (mt-dnn, mt_dnn/perturbation.py) does it: delta starts as Gaussian noise (sigma 1e-5); each ascent
   step adds `step_size` times the gradient of l_s with respect to delta, then divides delta per token by
   its largest coordinate (a 1e-6 guard in the division), so every token's perturbation ends with an
   infinity norm of about 1. `projection="ball"` takes the paper's Algorithm 1 instead: a step along the
   gradient normalised per token, then projection onto the infinity-norm ball of radius eps. l_s is the
   symmetric KL divergence (eq. 10) for classifiers (softmax over classes, a Bernoulli for a logit) and
   the squared error for regression.

   By default the perturbed passes and the clean output they are compared with run with dropout off, so
   the term measures how smooth the model is around x_i and nothing else; the clean side is a fixed
   target (no gradient), as in virtual adversarial training. With `keep_dropout` the passes keep dropout
   and compare with the training pass itself, as the reference code does; the term then also holds the
   difference between two dropout masks, which is R-Drop's (rdrop.py).

2. BregmanProximal, the momentum Bregman proximal point step (eq. 11-12 and the paper's Algorithm 1):

       theta_{t+1} = argmin_theta  F(theta) + mu D_Breg(theta, theta~_t),
       D_Breg(theta, theta~) = 1/n sum_i l_s(f(x_i; theta), f(x_i; theta~)),
       theta~_t = (1 - beta) theta_t + beta theta~_{t-1}

   a trust region around a momentum teacher theta~: the teacher's outputs on the clean batch (no gradient,
   dropout off) against the model's training outputs, the teacher updated as an exponential moving average
   after every optimizer step. The paper's beta is 0.99 for the first 10% of the updates and 0.999 after.
"""
import contextlib

import torch
import torch.nn as nn
import torch.nn.functional as F

from minbert.objectives.rows import mse_loss, row_mean
from minbert.flag import Flag

SMART_FLAGS = (
    Flag("smart_weight", 0.0, "nonneg_float",
         "SMART's adversarial smoothness term lambda_s (minbert/objectives/smart.py)"),
    Flag("smart_step", 1e-3, "nonneg_float", "SMART's ascent step size eta"),
    Flag("smart_steps", 1, "positive_int", "SMART's ascent steps"),
    Flag("smart_noise", 1e-5, "nonneg_float", "sigma of SMART's initial Gaussian perturbation"),
    Flag("smart_projection", "reference", ("reference", "ball"),
         "reference: as the authors' code, each token's perturbation scaled to infinity norm ~1 after the "
         "step; ball: the paper's Algorithm 1, projected onto the --smart_eps ball"),
    Flag("smart_eps", 1e-5, "nonneg_float", "the infinity-norm radius of --smart_projection ball",
         what="is the radius of --smart_projection ball",
         when=("--smart_projection ball", lambda flags: flags["smart_projection"] == "ball")),
    Flag("smart_dropout", False, "switch",
         "keep dropout on in SMART's perturbed passes (default off: the term then measures smoothness only, "
         "not the difference between two dropout masks)"),
)
BREGMAN_FLAGS = (
    Flag("smart_bregman_weight", 0.0, "nonneg_float",
         "mu of SMART's Bregman proximal point step, a symmetric-KL trust region around a momentum teacher; "
         "the paper's mu is 1"),
    Flag("smart_momentum", None, "momentum",
         "the teacher's EMA momentum beta (default: the paper's 0.99 for the first 10%% of the updates, "
         "0.999 after)", what="is the momentum of SMART's Bregman teacher"),
)


def symmetric_kl(p_logits, q_logits, weight=None):
    """KL(P||Q) + KL(Q||P) for categorical distributions given by logits [..., C], averaged over rows (those
    of weight 1 when a row `weight` is given: rows.py)."""
    lp, lq = F.log_softmax(p_logits.float(), -1), F.log_softmax(q_logits.float(), -1)
    return row_mean(((lp.exp() - lq.exp()) * (lp - lq)).sum(-1), weight)


def divergence(a, b, kind, weight=None):
    """l_s between two outputs of one batch: 'multiclass' logits [B, C], 'binary' logits [B], or
    'regression' scores [B] (squared error); averaged over the rows of weight 1 when `weight` is given."""
    if kind == "regression":
        return mse_loss(a.float(), b.float(), weight)
    if kind == "binary":  # a Bernoulli as two-class logits [0, z]
        a, b = (torch.stack([torch.zeros_like(x), x], -1) for x in (a, b))
    return symmetric_kl(a, b, weight)


@contextlib.contextmanager
def dropout_off(model, off=True):
    """Within the block every module of `model` is in eval mode (dropout off); each module's
    own mode is put back after."""
    modes = [(m, m.training) for m in model.modules()] if off else []
    for m, _ in modes:
        m.training = False
    try:
        yield
    finally:
        for m, mode in modes:
            m.training = mode


@contextlib.contextmanager
def perturbed(bert, deltas, noise_std):
    """Within the block, the i-th BERT call adds deltas[i] to its embedding output; a call without a delta
    yet creates one (Gaussian, sigma noise_std), so siamese pairs (two BERT calls) get one each."""
    calls = iter(range(10 ** 9))

    def add(x):
        i = next(calls)
        if i == len(deltas):
            deltas.append((torch.randn_like(x, dtype=torch.float32) * noise_std).requires_grad_())
        return x + deltas[i].to(x.dtype)
    bert.perturb = add
    try:
        yield deltas
    finally:
        bert.perturb = None


class SmartRegularizer(nn.Module):
    """lambda_s R_s for one batch. `run()` recomputes the batch's output with the model (the perturbation
    enters through `bert.perturb`); `clean` is the training pass's output."""

    def __init__(self, weight, step_size=1e-3, steps=1, noise_std=1e-5, projection="reference", eps=1e-5,
                 keep_dropout=False):
        super().__init__()
        if projection not in ("reference", "ball"):
            raise ValueError(f"unknown SMART projection {projection!r} (reference or ball)")
        self.weight, self.step_size, self.steps, self.noise_std = weight, step_size, steps, noise_std
        self.projection, self.eps, self.keep_dropout = projection, eps, keep_dropout

    @classmethod
    def build(cls, spec, model, total_steps):
        return cls(spec.smart_weight, spec.smart_step, spec.smart_steps, spec.smart_noise,
                   spec.smart_projection, spec.smart_eps, spec.smart_dropout)

    def regularize(self, loss, p):
        """The term of the pass `p`, perturbing the model's backbone (objectives/regularizers.py's protocol)."""
        return loss, self(p.model, p.model.backbone, p.rerun, p.output(p.first), p.kind, p.weight)

    def ascend(self, delta, grad):
        """One ascent step on the perturbation of one BERT call."""
        if self.projection == "reference":  # mt-dnn: step, then scale each token to infinity norm ~1
            delta = delta + self.step_size * grad
            return delta / (delta.abs().amax(-1, keepdim=True) + 1e-6)
        step = grad / grad.abs().amax(-1, keepdim=True).clamp_min(1e-12)  # Algorithm 1: normalised step
        return (delta + self.step_size * step).clamp(-self.eps, self.eps)  # and projection onto the eps-ball

    def forward(self, model, bert, run, clean, kind, weight=None):
        with dropout_off(model, not self.keep_dropout):
            if self.keep_dropout:
                target = clean
            else:
                with torch.no_grad():
                    target = run()
            deltas = []
            for _ in range(self.steps):  # ascent on l_s, with respect to the perturbations only
                with perturbed(bert, deltas, self.noise_std):
                    adv = run()
                grads = torch.autograd.grad(divergence(adv, target.detach(), kind, weight), deltas,
                                            allow_unused=True)
                deltas = [d.detach() if g is None else self.ascend(d.detach(), g).requires_grad_()
                          for d, g in zip(deltas, grads)]
            fixed = [d.detach() for d in deltas]
            with perturbed(bert, fixed, self.noise_std):
                adv = run()
        return self.weight * divergence(adv, target, kind, weight)


class BregmanProximal(nn.Module):
    """mu D_Breg(theta, theta~) for one batch, and the momentum teacher theta~ (buffers, so that the loss
    module's state_dict, saved by --resume, holds it). `after_step()` follows each optimizer step."""

    def __init__(self, model, weight=1.0, momentum=None, total_steps=1):
        super().__init__()
        self.weight, self.momentum, self.total_steps = weight, momentum, max(1, total_steps)
        self.params = [p for p in model.parameters() if p.requires_grad]
        for i, p in enumerate(self.params):  # theta~_0 = theta_0: the teacher starts as the model
            self.register_buffer(f"teacher_{i}", p.detach().clone())
        # the update count where the teacher is: read and counted on the device, so that a recorded step (CUDA
        # graphs) counts every replay and no step reads it back
        self.register_buffer("updates", torch.zeros((), dtype=torch.long, device=self.params[0].device))

    @classmethod
    def build(cls, spec, model, total_steps):
        return cls(model, spec.smart_bregman_weight, spec.smart_momentum, total_steps)

    def regularize(self, loss, p):
        """The term of the pass `p` (objectives/regularizers.py's protocol)."""
        return loss, self(p.model, p.rerun, p.output(p.first), p.kind, p.weight)

    def teacher(self):
        return [getattr(self, f"teacher_{i}") for i in range(len(self.params))]

    def beta(self):
        """The EMA's momentum at this update: --smart_momentum, or the paper's 0.99 for the
        first 10% of the updates and 0.999 after (a tensor where the update count is, so that
        reading it needs no host sync)."""
        if self.momentum is not None:
            return self.momentum
        return torch.where(self.updates < 0.1 * self.total_steps, 0.99, 0.999)

    @torch.no_grad()
    def after_step(self):
        """theta~ <- beta theta~ + (1 - beta) theta, after an optimizer step."""
        beta, teacher, params = self.beta(), self.teacher(), [p.detach() for p in self.params]
        # theta~ + (1 - beta)(theta - theta~), each line one kernel; lerp would read beta back
        if torch.is_tensor(beta):
            step = torch._foreach_sub(params, teacher)
            torch._foreach_mul_(step, 1.0 - beta)
            torch._foreach_add_(teacher, step)
        else:
            torch._foreach_lerp_(teacher, params, 1.0 - beta)
        self.updates.add_(1)

    @contextlib.contextmanager
    def as_teacher(self):
        """Within the block the model's trainable parameters hold the teacher's values (swapped, not copied)."""
        teacher = self.teacher()
        for p, t in zip(self.params, teacher):
            p.data, t.data = t.data, p.data
        try:
            yield
        finally:
            for p, t in zip(self.params, teacher):
                p.data, t.data = t.data, p.data

    def forward(self, model, run, out, kind, weight=None):
        with torch.no_grad(), self.as_teacher(), dropout_off(model), uncached_autocast(self.params[0].device):
            target = run()
        return self.weight * divergence(out, target, kind, weight)


def uncached_autocast(device):
    """Autocast as it is now, but without its cache of half-precision weights: that cache is keyed by the
    parameter, not its data, so the teacher's pass (the student's parameters holding the teacher's values)
    would otherwise reuse the student's cast weights from the training pass."""
    if not torch.is_autocast_enabled(device.type):
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.get_autocast_dtype(device.type), cache_enabled=False)
