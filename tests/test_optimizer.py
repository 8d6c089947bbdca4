"""optimizer.py: AdamW against Algorithm 1 by hand (`step` itself Algorithm 1 where no fast path is asked for, the
fast paths equal to that reference loop, a resumed state equal to an uninterrupted one, capturable steps equal to
plain ones), Lion and LAMB by their papers."""
import copy
import sys

import numpy as np
import pytest
import torch

import optimizer
from optimizer import AdamW
from tests.processes import DEVICES


def _model(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))


def _train(model, opt, steps, seed=1):
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        x = torch.randn(8, 5, generator=g)
        opt.zero_grad()
        model(x).pow(2).sum().backward()
        opt.step()


# capturable: the step count and the learning rate as device tensors (what the recorded step runs)
PATHS = {"foreach": dict(fused=False), "fused": dict(fused=True), "capturable": dict(fused=False, capturable=True)}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("path", sorted(PATHS))
def test_each_fast_path_equals_the_reference_loop(path, device):
    """50 steps, two groups with their own rate and weight decay, the rates changing every step (as a schedule
    changes them): the multi-tensor, the fused and the capturable paths take the reference loop's steps, to fp32
    rounding, on the CPU and on a GPU (where torch's fused and foreach kernels are other code)."""
    def train(**kw):
        model = _model().to(device)
        opt = AdamW([{"params": model[0].parameters()}, {"params": model[2].parameters(), "lr": 3e-2,
                                                           "weight_decay": 0.5}],
                    lr=1e-2, weight_decay=0.05, betas=(0.8, 0.99), eps=1e-6, **kw)
        g = torch.Generator().manual_seed(1)
        for _ in range(50):
            opt.zero_grad()
            model(torch.randn(8, 5, generator=g).to(device)).pow(2).sum().backward()
            opt.step()
            for group in opt.param_groups:
                group["lr"] *= 0.95
        return model, opt
    (ref, _), (fast, opt) = train(foreach=False), train(**PATHS[path])
    assert opt.defaults["fused"] == (path == "fused")
    for pa, pb in zip(ref.parameters(), fast.parameters()):
        torch.testing.assert_close(pb, pa, atol=1e-6, rtol=1e-5)
        assert pa.device.type == device
        assert not torch.equal(pa.cpu(), _model().state_dict()[[n for n, q in ref.named_parameters() if q is pa][0]])


@pytest.mark.parametrize("path", [dict(foreach=False), *PATHS.values()], ids=["loop", *PATHS])
def test_matches_algorithm_1_by_hand(path, opt_class=AdamW):
    p = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    opt = opt_class([p], lr=0.1, weight_decay=0.5, betas=(0.9, 0.999), eps=1e-6, **path)
    m = v = np.zeros(2)
    theta = np.array([1.0, -2.0])
    for t in range(1, 4):
        g = 2 * theta  # loss = sum(theta^2)
        opt.zero_grad()
        (p ** 2).sum().backward()
        opt.step()
        m = 0.9 * m + 0.1 * g
        v = 0.999 * v + 0.001 * g * g
        theta = theta - 0.1 * np.sqrt(1 - 0.999 ** t) / (1 - 0.9 ** t) * m / (np.sqrt(v) + 1e-6)
        theta = theta - 0.1 * 0.5 * theta
        np.testing.assert_allclose(p.detach().numpy(), theta, rtol=1e-6)


def _two_steps_by_hand(opt_kw, lr=0.1, b1=0.9, b2=0.999, eps=1e-2, lam=0.5):
    """Two AdamW steps on two tensors of one group, and the same two steps worked from the handout's equations:
    the efficient bias correction (eps outside it), then weight decay as the final update."""
    w, b = torch.nn.Parameter(torch.tensor([1.0, -2.0])), torch.nn.Parameter(torch.tensor([0.3]))
    opt = AdamW([w, b], lr=lr, betas=(b1, b2), eps=eps, weight_decay=lam, **opt_kw)
    theta, m, v = [[1.0, -2.0], [0.3]], [[0.0, 0.0], [0.0]], [[0.0, 0.0], [0.0]]
    for t, g in enumerate(([[0.5, -1.0], [0.25]], [[-0.2, 0.1], [0.75]]), start=1):
        w.grad, b.grad = torch.tensor(g[0]), torch.tensor(g[1])
        opt.step()
        alpha_t = lr * (1 - b2 ** t) ** 0.5 / (1 - b1 ** t)
        for i in range(2):
            m[i] = [b1 * mj + (1 - b1) * gj for mj, gj in zip(m[i], g[i])]
            v[i] = [b2 * vj + (1 - b2) * gj * gj for vj, gj in zip(v[i], g[i])]
            theta[i] = [x - alpha_t * mj / (vj ** 0.5 + eps) for x, mj, vj in zip(theta[i], m[i], v[i])]
            theta[i] = [x - lr * lam * x for x in theta[i]]
        for p, want in zip((w, b), theta):
            np.testing.assert_allclose(p.detach().numpy(), want, rtol=1e-6)
    assert opt.state[w]["step"] == opt.state[b]["step"] == 2


def test_step_itself_takes_algorithm_1_when_no_fast_path_is_asked_for(monkeypatch):
    """With foreach=False `step` computes Algorithm 1 itself, one tensor at a time: it takes the handout's steps,
    by hand, while no function of optimizer.py runs but `step` and those finding the tensors, their state and
    the path (none is given a moment or an update to compute). By default it hands the group to the fast paths
    (one call a step), which take the same steps."""
    calls, fast = [], optimizer.AdamW._step_fast

    def counted(self, group, params):
        calls.append(len(params))
        return fast(self, group, params)
    monkeypatch.setattr(optimizer.AdamW, "_step_fast", counted)
    entered = set()

    def record(frame, event, arg):
        # (a comprehension is a frame of its own, "<listcomp>": part of the function it is written in)
        if event == "call" and frame.f_code.co_filename == optimizer.__file__ and frame.f_code.co_name[0] != "<":
            entered.add(frame.f_code.co_name)
    sys.setprofile(record)
    try:
        _two_steps_by_hand({"foreach": False})
    finally:
        sys.setprofile(None)
    assert "step" in entered and "__init__" in entered  # (the profile sees optimizer.py's functions)
    assert entered <= {"__init__", "step", "evaluate_closure", "_with_state", "_init", "_asks_for_fast_path",
                       "_fused_applies", "check_hyperparameters"}, entered
    assert calls == []
    _two_steps_by_hand({})
    assert calls == [2, 2]


def test_state_dict_resume_equals_uninterrupted():
    a = _model()
    opt_a = AdamW(a.parameters(), lr=1e-2, weight_decay=0.01)
    _train(a, opt_a, 10, seed=1)
    _train(a, opt_a, 10, seed=2)

    b = _model()
    opt_b = AdamW(b.parameters(), lr=1e-2, weight_decay=0.01)
    _train(b, opt_b, 10, seed=1)
    saved_model, saved_opt = copy.deepcopy(b.state_dict()), copy.deepcopy(opt_b.state_dict())
    c = _model(seed=5)
    c.load_state_dict(saved_model)
    opt_c = AdamW(c.parameters(), lr=1e-2, weight_decay=0.01)
    opt_c.load_state_dict(saved_opt)
    _train(c, opt_c, 10, seed=2)
    for pa, pc in zip(a.parameters(), c.parameters()):
        torch.testing.assert_close(pa, pc, atol=0, rtol=0)


def test_bad_hyperparameters():
    p = [torch.nn.Parameter(torch.zeros(1))]
    with pytest.raises(ValueError, match="learning rate"):
        AdamW(p, lr=-1)
    with pytest.raises(ValueError, match="betas"):
        AdamW(p, betas=(1.0, 0.9))


# ----------------------------------------------------------------------------- Lion and LAMB, by their papers' equations

def test_lion_follows_its_algorithm_on_hand_made_tensors():
    """Chen et al. 2023, Algorithm 2, two steps worked by hand: c = b1 m + (1 - b1) g; theta -= lr (sign(c) +
    lambda theta); m = b2 m + (1 - b2) g."""
    from optimizer import Lion
    p = torch.nn.Parameter(torch.tensor([1.0, -2.0, 0.5]))
    opt = Lion([p], lr=0.1, betas=(0.9, 0.99), weight_decay=0.5)
    p.grad = torch.tensor([0.3, -0.2, 0.0])
    opt.step()
    # m0 = 0: c = 0.1 g = [0.03, -0.02, 0]; sign = [1, -1, 0]; theta = theta (1 - 0.05) - 0.1 sign
    expected = torch.tensor([1.0 * 0.95 - 0.1, -2.0 * 0.95 + 0.1, 0.5 * 0.95])
    torch.testing.assert_close(p.data, expected)
    m1 = 0.01 * torch.tensor([0.3, -0.2, 0.0])
    torch.testing.assert_close(opt.state[p]["exp_avg"], m1)
    p.grad = torch.tensor([-0.01, -0.5, 0.2])
    opt.step()
    c = 0.9 * m1 + 0.1 * torch.tensor([-0.01, -0.5, 0.2])  # [0.0017, -0.0518, 0.02]: signs +, -, +
    torch.testing.assert_close(p.data, expected * 0.95 - 0.1 * torch.sign(c))
    torch.testing.assert_close(opt.state[p]["exp_avg"], 0.99 * m1 + 0.01 * torch.tensor([-0.01, -0.5, 0.2]))


def test_lamb_scales_adams_step_by_the_trust_ratio():
    """You et al. 2020, Algorithm 2, one step by hand: r = m_hat / (sqrt(v_hat) + eps), u = r + lambda theta,
    theta -= lr ||theta|| / ||u|| u; a tensor at zero takes the plain step (ratio 1)."""
    from optimizer import Lamb
    w = torch.nn.Parameter(torch.tensor([3.0, 4.0]))          # ||w|| = 5
    b = torch.nn.Parameter(torch.zeros(2))                    # ||b|| = 0
    opt = Lamb([w, b], lr=0.01, betas=(0.9, 0.999), eps=0.0, weight_decay=0.1)
    w.grad, b.grad = torch.tensor([1.0, -2.0]), torch.tensor([0.5, 0.5])
    opt.step()
    # step 1: m_hat = g, v_hat = g^2, so r = sign(g) = [1, -1]; u = r + 0.1 [3, 4] = [1.3, -0.6]
    u = torch.tensor([1.3, -0.6])
    torch.testing.assert_close(w.data, torch.tensor([3.0, 4.0]) - 0.01 * 5.0 / u.norm() * u)
    torch.testing.assert_close(b.data, -0.01 * torch.tensor([1.0, 1.0]))  # r = [1, 1], u = r, ratio 1
    # one more step: the bias corrections of step 2
    w0, g = w.data.clone(), torch.tensor([0.2, 0.4])
    w.grad, b.grad = g, None
    opt.step()
    m = 0.9 * 0.1 * torch.tensor([1.0, -2.0]) + 0.1 * g
    v = 0.999 * 0.001 * torch.tensor([1.0, 4.0]) + 0.001 * g ** 2
    r = (m / (1 - 0.9 ** 2)) / (v / (1 - 0.999 ** 2)).sqrt()
    u = r + 0.1 * w0
    torch.testing.assert_close(w.data, w0 - 0.01 * w0.norm() / u.norm() * u)


@pytest.mark.parametrize("name", ["lion", "lamb"])
def test_the_other_optimizers_train_a_pipeline(tmp_path, course_data, tiny_model, name, capsys):
    import multitask_classifier as mt
    from tests.course import part2_args
    mt.main(part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "3", "--optimizer", name))
    saved = torch.load(tmp_path / "ck" / "mt-last.pt", weights_only=True)["trainer"]["optimizer"]
    keys = {k for s in saved["state"].values() for k in s}
    assert keys == ({"exp_avg"} if name == "lion" else {"step", "exp_avg", "exp_avg_sq"})


# ----------------------------------------------------------------------------- the capturable step (device-side state)


def test_capturable_adamw_with_the_device_schedule_takes_the_plain_steps():
    """Two groups at different rates, weight decay, warm-up then linear decay: the capturable path (step count
    and learning rate as tensors, written in place) gives the plain path's parameters step for step."""
    from minbert.training.schedule import DeviceSchedule, make_scheduler
    torch.manual_seed(0)
    a, b = torch.nn.Linear(5, 4), torch.nn.Linear(5, 4)
    b.load_state_dict(a.state_dict())

    def groups(m):
        return [{"params": [m.weight], "lr": 1e-2}, {"params": [m.bias], "lr": 3e-2}]
    plain = AdamW(groups(a), weight_decay=0.1)
    plain_schedule = make_scheduler(plain, "linear", 0.25, 12)
    capt = AdamW(groups(b), weight_decay=0.1, capturable=True)
    capt_schedule = DeviceSchedule(capt, "linear", 0.25, 12, torch.device("cpu"))
    for step in range(12):
        x = torch.randn(6, 5)
        for m, opt, sched in ((a, plain, plain_schedule), (b, capt, capt_schedule)):
            m.zero_grad()
            m(x).pow(2).mean().backward()
            opt.step()
            sched.step()
        for p, q in zip(a.parameters(), b.parameters()):
            torch.testing.assert_close(q, p)  # fp32 tolerance: alpha is rounded to fp32 on the device path
        assert [float(g["lr"]) for g in capt.param_groups] == pytest.approx([g["lr"] for g in plain.param_groups])
    state = capt.state[b.weight]
    assert torch.is_tensor(state["step"]) and float(state["step"]) == 12
    assert all(torch.is_tensor(g["lr"]) and g["lr"].dim() == 0 for g in capt.param_groups)


@pytest.mark.parametrize("device", DEVICES)
def test_the_compiled_update_takes_the_capturable_steps_and_compiling_it_changes_nothing(device):
    """--compile's AdamW update (Inductor's one pass, compiled in a recorded step's warm-up by compile_now)
    gives the capturable path's parameters step for step, and compile_now leaves the parameters, moments and
    step counts as they were."""
    from torch._dynamo.utils import counters
    torch._dynamo.reset()  # (nothing compiled before: compile_now must compile)
    torch.manual_seed(0)
    a, b = torch.nn.Linear(5, 4).to(device), torch.nn.Linear(5, 4).to(device)
    b.load_state_dict(a.state_dict())

    def make(m, **kw):
        lr = torch.tensor(1e-2, device=device)  # a device schedule's rate
        return AdamW([{"params": [m.weight, m.bias], "lr": lr}], weight_decay=0.1, capturable=True, **kw)
    plain, comp = make(a), make(b, compiled=True)
    graphs = counters["stats"]["unique_graphs"]
    for step in range(5):
        x = torch.randn(6, 5, device=device)
        for m, opt in ((a, plain), (b, comp)):
            m.zero_grad()
            m(x).pow(2).mean().backward()
            if opt is comp and step == 0:
                before = [t.clone() for t in (b.weight, b.bias)]
                opt.compile_now()
                assert counters["stats"]["unique_graphs"] > graphs  # compiled, before its first step
                for t, was in zip((b.weight, b.bias), before):
                    assert torch.equal(t, was)
                assert all(float(s["step"]) == 0 and not s["exp_avg"].any() for s in comp.state.values())
            opt.step()
        for p, q in zip(a.parameters(), b.parameters()):
            torch.testing.assert_close(q, p)
    assert float(comp.state[b.weight]["step"]) == 5


def test_lion_mixes_the_gradient_in_by_beta1_and_keeps_it_by_beta2():
    """One coordinate, two steps where the two betas give opposite signs: g = 1 then -0.2, betas (0.9, 0.99).
    Step 1: c = 0.1 > 0, theta = -0.1, m = 0.01. Step 2: c = 0.9 * 0.01 + 0.1 * -0.2 = -0.011 < 0, so theta
    goes back to 0 (with beta2 in c it would be +0.0079 and theta -0.2)."""
    from optimizer import Lion
    p = torch.nn.Parameter(torch.zeros(1))
    opt = Lion([p], lr=0.1, betas=(0.9, 0.99), weight_decay=0.0)
    for g in (1.0, -0.2):
        p.grad = torch.tensor([g])
        opt.step()
    torch.testing.assert_close(p.data, torch.zeros(1))
    torch.testing.assert_close(opt.state[p]["exp_avg"], torch.tensor([0.99 * 0.01 + 0.01 * -0.2]))


def test_adamw_defaults_and_the_paths_each_setting_picks():
    """The handout's eps (1e-6); torch's fused kernel only with the foreach pass on and bias correction on (it has
    no uncorrected form): without it, the uncorrected steps are the reference loop's."""
    p = torch.nn.Parameter(torch.ones(3))
    assert AdamW([p]).defaults["eps"] == 1e-6
    assert not AdamW([p], foreach=False, fused=True).param_groups[0]["fused"]
    g = torch.Generator().manual_seed(0)
    grads = [torch.randn(3, generator=g) for _ in range(3)]
    out = {}
    for name, kw in (("default", {}), ("loop", {"foreach": False})):
        q = torch.nn.Parameter(torch.ones(3))
        opt = AdamW([q], lr=0.1, correct_bias=False, weight_decay=0.01, **kw)
        for grad in grads:
            q.grad = grad.clone()
            opt.step()
        out[name] = q.detach().clone()
    torch.testing.assert_close(out["default"], out["loop"], atol=1e-7, rtol=1e-6)


@pytest.mark.parametrize("name", ["adamw", "lion", "lamb"])
def test_the_state_size_each_optimizer_is_said_to_keep_is_what_it_keeps(name):
    """STATE_TENSORS (the start line's optimizer-state size) counts the tensors of a parameter's shape that the
    optimizer holds for it after a step."""
    from optimizer import OPTIMIZERS, STATE_TENSORS
    p = torch.nn.Parameter(torch.ones(4, 3))
    opt = OPTIMIZERS[name]([p], lr=1e-3)
    p.grad = torch.ones(4, 3)
    opt.step()
    kept = [v for v in opt.state[p].values() if torch.is_tensor(v) and v.shape == p.shape]
    assert len(kept) == STATE_TENSORS[name]
