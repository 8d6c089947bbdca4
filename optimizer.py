"""The optimizers, written from their papers' algorithms: AdamW as the handout's Algorithm 1 ("efficient" bias
correction) with decoupled weight decay, and `--optimizer lion` and `--optimizer lamb` beside it (each class
states its update). `make_optimizer` builds the one the flags name."""
import functools
import math

import torch
from torch.optim import Optimizer


def check_hyperparameters(lr, betas, eps=0.0):
    """The checks every optimizer here makes of its settings (a ValueError naming the bad one)."""
    if not torch.is_tensor(lr) and lr < 0.0:
        raise ValueError(f"invalid learning rate {lr}: must be >= 0")
    if not (0.0 <= betas[0] < 1.0 and 0.0 <= betas[1] < 1.0):
        raise ValueError(f"invalid betas {betas}: each must be in [0, 1)")
    if eps < 0.0:
        raise ValueError(f"invalid epsilon {eps}: must be >= 0")


def evaluate_closure(closure):
    """torch.optim's protocol: a step may be given a closure that recomputes the loss; returns that loss."""
    if closure is None:
        return None
    with torch.enable_grad():
        return closure()


class AdamW(Optimizer):
    """The handout's AdamW: Algorithm 1 with its efficient bias correction, and decoupled weight decay after the
    step. `step` is Algorithm 1 as the handout writes it, one parameter tensor at a time: the path of
    `foreach=False` (--no_foreach), which tests/test_optimizer.py holds the others to step for step.

    A group that asks for a fast path goes, at the top of `step`, to `_step_fast`, which computes the same update
    over the whole group at once: by default (`fused=True`, where torch has the kernel: CPU and CUDA) torch's
    fused AdamW kernel updates each tensor in one pass, with its inputs mapped so that it computes Algorithm 1
    (_step_fused); with `fused=False`, or without bias correction (the kernel has no uncorrected form), each line
    runs as one multi-tensor kernel over the group (_step_foreach).

    `capturable=True` keeps everything a step reads on the parameters' device: the step count is a tensor
    there, and a group's "lr" may be a 0-d tensor too (training/schedule.py DeviceSchedule writes it in
    place), so a step runs no Python arithmetic on changing values and no host sync. That is what a CUDA graph
    of the whole training step needs (it replays recorded kernels, with their Python scalars frozen).
    `compiled=True` (--compile) runs that capturable path compiled by Inductor into one pass over each
    parameter (_step_compiled)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0,
                 correct_bias=True, foreach=True, capturable=False, fused=True, compiled=False):
        check_hyperparameters(lr, betas, eps)
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, correct_bias=correct_bias,
                        foreach=foreach, capturable=capturable, fused=fused and foreach and FUSED_KERNEL)
        self.compiled = compiled  # not a group's setting: a saved state loaded into this optimizer keeps it
        super().__init__(params, defaults)

    def _init(self, p, capturable):
        """A parameter's state before its first step (or, made capturable, its step count moved to its device)."""
        state = self.state[p]
        if not state:
            state["step"] = torch.zeros((), dtype=torch.float32, device=p.device) if capturable else 0
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        elif capturable and not torch.is_tensor(state["step"]):
            state["step"] = torch.tensor(float(state["step"]), dtype=torch.float32, device=p.device)
        return state

    def _with_state(self, group):
        """The group's tensors that have a gradient, each with its state."""
        params, capturable = [p for p in group["params"] if p.grad is not None], group.get("capturable", False)
        for p in params:
            if p.grad.is_sparse:
                raise RuntimeError("AdamW does not support sparse gradients")
            self._init(p, capturable)
        return params

    @torch.no_grad()
    def init_state(self, capturable=True):
        """Create every parameter's state now, and make the groups `capturable`: a CUDA graph replays what it
        recorded, so state created inside a recorded step would be created again (zeroed) at every replay."""
        for group in self.param_groups:
            group["capturable"] = capturable
            for p in group["params"]:
                self._init(p, capturable)

    @torch.no_grad()
    def step(self, closure=None):
        """One step of Algorithm 1 on every parameter that has a gradient."""
        loss = evaluate_closure(closure)
        for group in self.param_groups:
            params = self._with_state(group)  # at a tensor's first step: m_0 = 0, v_0 = 0, t = 0
            if not params:
                continue
            if _asks_for_fast_path(group, params):  # the default does: the same update, the group at once
                self._step_fast(group, params)
                continue
            alpha, (beta1, beta2), eps, lam = group["lr"], group["betas"], group["eps"], group["weight_decay"]
            # t <- t + 1: one time step for the group, its first tensor's count (every path reads it so)
            t = self.state[params[0]]["step"] + 1
            for theta in params:
                state, g = self.state[theta], theta.grad                   # g_t
                state["step"] += 1
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(g, alpha=1 - beta1)                     # m_t = beta1 m_{t-1} + (1 - beta1) g_t
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)              # v_t = beta2 v_{t-1} + (1 - beta2) g_t^2
                # the efficient bias correction, in place of m_hat_t and v_hat_t:
                # alpha_t = alpha sqrt(1 - beta2^t) / (1 - beta1^t)
                alpha_t = alpha * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t) if group["correct_bias"] else alpha
                # theta_t = theta_{t-1} - alpha_t m_t / (sqrt(v_t) + eps)
                theta.addcdiv_(m, v.sqrt().add_(eps), value=-alpha_t)
                # weight decay, decoupled, as the final update: theta_t <- theta_t - alpha lambda theta_t
                if lam:
                    theta.add_(theta, alpha=-alpha * lam)
        return loss

    def _step_fast(self, group, params):
        """`step`'s update of `params` (the group's tensors with a gradient, their state created) by the fast
        path the group asks for: capturable (compiled or not), else torch's fused kernel, else multi-tensor."""
        if group.get("capturable"):  # every step count in one kernel
            torch._foreach_add_([self.state[p]["step"] for p in params], 1.0)
            update = _step_compiled() if self.compiled else _step_capturable
            update(params, *self._capturable_args(group, params))
            return
        for p in params:
            self.state[p]["step"] += 1
        grads = [p.grad for p in params]
        m = [self.state[p]["exp_avg"] for p in params]
        v = [self.state[p]["exp_avg_sq"] for p in params]
        t = self.state[params[0]]["step"]  # the group's time step, as in `step`
        beta1, beta2 = group["betas"]
        lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
        if _fused_applies(group, params):
            _step_fused(params, grads, m, v, beta1, beta2, lr, eps, wd, t)
            return
        # Efficient bias correction: fold both corrections into the step size.
        alpha = lr * math.sqrt(1 - beta2 ** t) / (1 - beta1 ** t) if group["correct_bias"] else lr
        _step_foreach(params, grads, m, v, beta1, beta2, alpha, eps, lr * wd)

    def _capturable_args(self, group, params):
        """_step_capturable's arguments for `params` of `group` (their state created)."""
        t = self.state[params[0]]["step"]  # all tensors of a group share one step count
        m, v = ([self.state[p][k] for p in params] for k in ("exp_avg", "exp_avg_sq"))
        lr = torch.as_tensor(group["lr"], dtype=torch.float32, device=t.device)
        return ([p.grad for p in params], m, v, t, lr, *group["betas"], group["eps"], group["weight_decay"],
                group["correct_bias"])

    @torch.no_grad()
    def compile_now(self):
        """With `compiled`, compile the update of the parameters that have gradients now (one compilation per
        list of them) and leave every tensor as it was: a recorded step (training/recorded.py) calls this in
        its warm-up, so that no compilation happens inside a recording."""
        for group in self.param_groups if self.compiled else ():
            params = [p for p in group["params"] if p.grad is not None]
            if not params or not group.get("capturable"):
                continue
            for p in params:
                self._init(p, True)
            grads, m, v, *rest = self._capturable_args(group, params)
            changed = [*params, *m, *v]
            saved = [x.clone() for x in changed]
            _step_compiled()(params, grads, m, v, *rest)
            torch._foreach_copy_(changed, saved)


def _moments_foreach(grads, m, v, beta1, beta2, eps):
    """m_t and v_t in place, one multi-tensor kernel a line; returns sqrt(v_t) + eps."""
    torch._foreach_mul_(m, beta1)
    torch._foreach_add_(m, grads, alpha=1 - beta1)
    torch._foreach_mul_(v, beta2)
    torch._foreach_addcmul_(v, grads, grads, value=1 - beta2)
    denom = torch._foreach_sqrt(v)
    torch._foreach_add_(denom, eps)
    return denom


def _step_foreach(params, grads, m, v, beta1, beta2, alpha, eps, decay):
    """The same arithmetic in the same order, each line one multi-tensor kernel over the whole group."""
    denom = _moments_foreach(grads, m, v, beta1, beta2, eps)
    torch._foreach_addcdiv_(params, m, denom, value=-alpha)
    if decay:
        torch._foreach_add_(params, params, alpha=-decay)


# torch's fused AdamW kernel (torch >= 2.4 on the CPU): one pass over each parameter, gradient and moment.
FUSED_KERNEL = hasattr(torch, "_fused_adamw_")


def _fused_applies(group, params):
    """Whether torch's fused kernel takes the group: asked for, with bias correction on (the kernel has no
    uncorrected form), on a device the kernel runs on."""
    return bool(group.get("fused") and group["correct_bias"] and params[0].device.type in ("cpu", "cuda"))


def _asks_for_fast_path(group, params):
    """Whether AdamW.step hands the group to _step_fast: capturable, multi-tensor or fused (the default)."""
    return bool(group.get("capturable") or group["foreach"] or _fused_applies(group, params))


def _step_fused(params, grads, m, v, beta1, beta2, lr, eps, wd, t):
    """Algorithm 1 through torch's fused kernel. That kernel computes torch.optim.AdamW's update,

        theta <- (1 - lr' wd') theta - lr' / (1 - beta1^t) * m_t / (sqrt(v_t) / sqrt(1 - beta2^t) + eps'),

    decaying before the step and with eps inside the bias correction. With lr' = lr (1 - lr wd),
    wd' = wd / (1 - lr wd) and eps' = eps / sqrt(1 - beta2^t) this is, term by term,

        theta <- (1 - lr wd) (theta - alpha m_t / (sqrt(v_t) + eps)),
        alpha = lr sqrt(1 - beta2^t) / (1 - beta1^t),

    the efficient bias correction followed by decoupled weight decay, as the handout's Algorithm 1 has it."""
    keep = 1.0 - lr * wd
    # the kernel reads t from a tensor
    steps = [torch.full((), float(t), device=params[0].device)] * len(params)
    torch._fused_adamw_(params, grads, m, v, [], steps, amsgrad=False, maximize=False, beta1=beta1,
                        beta2=beta2,
                        lr=lr * keep, weight_decay=wd / keep if wd else 0.0,
                        eps=eps / math.sqrt(1 - beta2 ** t))


def _step_capturable(params, grads, m, v, t, lr, beta1, beta2, eps, wd, correct_bias):
    """Algorithm 1 with the step count `t` and the learning rate `lr` as 0-d tensors on the device, in as few
    passes over the parameters as plain multi-tensor kernels allow (8; torch's fused kernel, one, puts eps
    inside the bias correction, so it cannot run Algorithm 1 when the step count is a device tensor). The
    step size alpha = lr sqrt(1 - beta2^t) / (1 - beta1^t) rides in the denominator, d = (sqrt(v_t) + eps) /
    -alpha, so that one addcdiv applies it:

        m_t = lerp(m, g, 1 - beta1)  (= beta1 m + (1 - beta1) g)      one pass
        v_t = beta2 v + (1 - beta2) g^2                                two
        d = (sqrt(v_t) + eps) * (-1 / alpha)                           three
        theta <- theta + m_t / d,  then theta <- (1 - lr wd) theta     two

    Each line rounds as the plain path's up to fp32's last bits (tests/test_optimizer.py)."""
    if correct_bias:
        # 1 - beta^t as -expm1(t ln beta): in fp32, 1 - 0.999^t would lose most of its digits to cancellation
        correction1, correction2 = (torch.expm1(t * math.log(b)).neg() if b else torch.ones_like(t)
                                    for b in (beta1, beta2))
        neg_inv_alpha = (correction1 / (lr * correction2.sqrt())).neg()
    else:
        neg_inv_alpha = lr.reciprocal().neg()
    torch._foreach_lerp_(m, grads, 1 - beta1)
    torch._foreach_mul_(v, beta2)
    torch._foreach_addcmul_(v, grads, grads, value=1 - beta2)
    denom = torch._foreach_sqrt(v)
    torch._foreach_add_(denom, eps)
    torch._foreach_mul_(denom, neg_inv_alpha)
    torch._foreach_addcdiv_(params, m, denom)
    if wd:
        torch._foreach_mul_(params, 1 - lr * wd)


@functools.cache
def _step_compiled():
    """_step_capturable compiled by Inductor (made at the first call, then kept), which fuses its eight
    multi-tensor lines: each parameter, gradient and moment is read once and written once, as in torch's fused
    kernel, while the arithmetic stays Algorithm 1's (on the CPU its generated code, TORCH_LOGS=output_code, is
    one kernel with one loop per tensor). It costs a compilation per list of parameters with gradients (Part 2:
    one per task, as a task's step leaves the other heads without one). A step recorded as a CUDA graph replays
    the compiled kernels like any others (recorded.py: the warm-up compiles, before recording)."""
    # dynamic=False: a new list (another task) is compiled for its own shapes, never made symbolic
    return torch.compile(_step_capturable, fullgraph=True, dynamic=False)


class Lion(Optimizer):
    """Lion (Chen et al. 2023, "Symbolic Discovery of Optimization Algorithms", Algorithm 2): the sign of an
    interpolation between the momentum and the gradient, with decoupled weight decay,

        c_t = beta1 m_{t-1} + (1 - beta1) g_t
        theta_t = theta_{t-1} - lr (sign(c_t) + lambda theta_{t-1})
        m_t = beta2 m_{t-1} + (1 - beta2) g_t ,

    defaults beta1 = 0.9, beta2 = 0.99. Every coordinate moves by exactly lr, so its learning rate is
    smaller than AdamW's (the paper: 3-10x) and its weight decay larger. One state tensor per
    parameter (AdamW keeps two)."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        check_hyperparameters(lr, betas)
        super().__init__(params, dict(lr=lr, betas=betas, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = evaluate_closure(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, wd = group["lr"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                state = self.state[p]
                if not state:
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                m = state["exp_avg"]
                update = (m * beta1 + g * (1 - beta1)).sign_()              # sign(c_t)
                if wd:
                    p.mul_(1 - lr * wd)                                      # - lr lambda theta_{t-1}
                p.add_(update, alpha=-lr)                                    # - lr sign(c_t)
                m.mul_(beta2).add_(g, alpha=1 - beta2)                       # m_t
        return loss


class Lamb(Optimizer):
    """LAMB (You et al. 2020, "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes",
    Algorithm 2): Adam's bias-corrected direction plus decoupled weight decay, rescaled per layer (here: per
    parameter tensor) by the trust ratio ||theta|| / ||u||,

        m_t = beta1 m_{t-1} + (1 - beta1) g_t,       v_t = beta2 v_{t-1} + (1 - beta2) g_t^2
        r_t = (m_t / (1 - beta1^t)) / (sqrt(v_t / (1 - beta2^t)) + eps)
        u_t = r_t + lambda theta_{t-1}
        theta_t = theta_{t-1} - lr (phi(||theta_{t-1}||) / ||u_t||) u_t ,

    with phi the identity, and a ratio of 1 where either norm is 0 (a tensor at
    zero, such as a fresh bias)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-6, weight_decay=0.0):
        check_hyperparameters(lr, betas, eps)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self, closure=None):
        loss = evaluate_closure(closure)
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            lr, eps, wd = group["lr"], group["eps"], group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                g = p.grad
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["step"] += 1
                t, m, v = state["step"], state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(g, alpha=1 - beta1)                       # m_t
                v.mul_(beta2).addcmul_(g, g, value=1 - beta2)                # v_t
                r = (m / (1 - beta1 ** t)) / ((v / (1 - beta2 ** t)).sqrt_().add_(eps))  # r_t
                u = r.add_(p, alpha=wd) if wd else r                         # u_t
                w_norm, u_norm = p.norm(), u.norm()
                ratio = torch.where((w_norm > 0) & (u_norm > 0), w_norm / u_norm, torch.ones_like(w_norm))
                p.sub_(lr * ratio * u)                                       # theta_t
        return loss


def portable_state(state):
    """An optimizer's state_dict in the one form an eager step and a recorded one (capturable, with the step
    counts and learning rates as device tensors) both load: learning rates as numbers, step counts as whole
    numbers, `capturable` off (the recorded step turns it back on: AdamW.init_state)."""
    groups = [{**g, "lr": float(g["lr"]), **({"capturable": False} if "capturable" in g else {})}
              for g in state["param_groups"]]
    per_param = {k: {**v, "step": int(round(float(v["step"])))} if "step" in v else v for k,
                 v in state["state"].items()}
    return {"state": per_param, "param_groups": groups}


# --optimizer's choices; each one's default learning rate is a row of minbert/flags/defaults.py's table.
OPTIMIZERS = {"adamw": AdamW, "lion": Lion, "lamb": Lamb}
STATE_TENSORS = {"adamw": 2, "lion": 1, "lamb": 2}  # tensors of state per parameter (describe_trainable)


def make_optimizer(name, groups, lr, weight_decay=0.0, foreach=True, fused=True, compiled=False):
    """The optimizer `--optimizer NAME` asks for, over parameter `groups` (training/schedule.py param_groups);
    `foreach` and `fused` pick AdamW's path (--no_foreach, --no_fused), `compiled` its recorded step's
    (--compile)."""
    if name == "adamw":
        return AdamW(groups, lr=lr, weight_decay=weight_decay, foreach=foreach, fused=fused, compiled=compiled)
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; choose from {', '.join(OPTIMIZERS)}")
    return OPTIMIZERS[name](groups, lr=lr, weight_decay=weight_decay)
