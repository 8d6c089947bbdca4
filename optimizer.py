"""AdamW as the handout's Algorithm 1 ("efficient" bias correction) with decoupled weight decay."""
import math

import torch
from torch.optim import Optimizer


class AdamW(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0,
                 correct_bias=True, foreach=True):
        if lr < 0.0:
            raise ValueError(f"invalid learning rate {lr}: must be >= 0")
        if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
            raise ValueError(f"invalid betas {betas}: each must be in [0, 1)")
        if eps < 0.0:
            raise ValueError(f"invalid epsilon {eps}: must be >= 0")
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                        correct_bias=correct_bias, foreach=foreach)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            for p in params:
                if p.grad.is_sparse:
                    raise RuntimeError("AdamW does not support sparse gradients")
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
            # All tensors of a group share one step count (they are created and stepped together).
            t = self.state[params[0]]["step"]
            beta1, beta2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            # Efficient bias correction: fold both corrections into the step size.
            alpha = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t) if group["correct_bias"] else lr
            grads = [p.grad for p in params]
            m = [self.state[p]["exp_avg"] for p in params]
            v = [self.state[p]["exp_avg_sq"] for p in params]
            (_step_foreach if group["foreach"] else _step_loop)(params, grads, m, v, beta1, beta2, alpha, eps, lr * wd)
        return loss


def _step_loop(params, grads, m, v, beta1, beta2, alpha, eps, decay):
    """The reference: Algorithm 1 line by line, one tensor at a time."""
    for p, g, m_, v_ in zip(params, grads, m, v):
        m_.mul_(beta1).add_(g, alpha=1 - beta1)                    # m_t
        v_.mul_(beta2).addcmul_(g, g, value=1 - beta2)             # v_t
        p.addcdiv_(m_, v_.sqrt().add_(eps), value=-alpha)          # theta_t
        if decay:
            p.add_(p, alpha=-decay)                                # decoupled weight decay, after the step


def _step_foreach(params, grads, m, v, beta1, beta2, alpha, eps, decay):
    """The same arithmetic in the same order, each line one multi-tensor kernel over the whole group."""
    torch._foreach_mul_(m, beta1)
    torch._foreach_add_(m, grads, alpha=1 - beta1)
    torch._foreach_mul_(v, beta2)
    torch._foreach_addcmul_(v, grads, grads, value=1 - beta2)
    denom = torch._foreach_sqrt(v)
    torch._foreach_add_(denom, eps)
    torch._foreach_addcdiv_(params, m, denom, value=-alpha)
    if decay:
        torch._foreach_add_(params, params, alpha=-decay)
