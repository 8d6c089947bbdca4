"""tasks/sampling.py: every sampler's schedule (annealed, proportional, round-robin, all, sequential)."""
import numpy as np
import pytest


def test_samplers():
    from minbert.tasks.sampling import annealed_alpha, task_schedule
    sizes = {"sst": 8000, "quora": 14000, "sts": 6000}
    rng = np.random.default_rng(0)
    rr = task_schedule(sizes, "round-robin", 9, 0, 3, rng, 32)
    assert rr == ["sst", "quora", "sts"] * 3
    prop = task_schedule(sizes, "proportional", 28000, 0, 3, rng, 32)
    assert abs(prop.count("quora") / 28000 - 0.5) < 0.02
    assert annealed_alpha(0, 5) == 1.0 and annealed_alpha(4, 5) == pytest.approx(0.2)
    last = task_schedule(sizes, "annealed", 28000, 4, 5, rng, 32)
    p = np.array([8000, 14000, 6000]) ** 0.2
    assert abs(last.count("quora") / 28000 - p[1] / p.sum()) < 0.02
    seq = task_schedule(sizes, "sequential", 28, 0, 3, rng, 1000)
    assert seq == ["sst"] * 8 + ["quora"] * 14 + ["sts"] * 6
    half = task_schedule(sizes, "sequential", 14, 0, 3, rng, 1000)  # a step budget, shared alike
    assert half == ["sst"] * 4 + ["quora"] * 7 + ["sts"] * 3
