"""tasks/sampling.py: every sampler's schedule (annealed, proportional, round-robin, all, sequential); a new order
per epoch, per pass and per task; a restored stream continues with the batches it would have given."""
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


class _Data:
    """A task's training set as TaskStream reads it: lengths, a name, and batches that are their indices."""

    def __init__(self, name, n):
        self.task, self.lengths = type("Task", (), {"name": name}), np.arange(n) % 5 + 1

    def __len__(self):
        return len(self.lengths)

    def rank_batch(self, idx, rank=0, world_size=1):
        return {"index": [int(i) for i in idx]}


def _batches(seed=3, mode="annealed"):
    from minbert.tasks.sampling import MultitaskBatches
    return MultitaskBatches({"sst": _Data("sst", 40), "quora": _Data("quora", 64), "sts": _Data("sts", 40)},
                            batch_size=8, seed=seed, mode=mode, epochs=3)


def test_every_epoch_and_every_pass_draws_a_new_order_each_task_its_own():
    assert _batches(mode="proportional").schedule(0) != _batches(mode="proportional").schedule(1)  # per epoch
    mb = _batches()
    sst = [next(mb.streams["sst"])["index"] for _ in range(10)]  # two passes of 5 batches
    sts = [next(mb.streams["sts"])["index"] for _ in range(5)]
    for one_pass in (sst[:5], sst[5:], sts):
        assert sorted(sum(one_pass, [])) == list(range(40))  # each pass: every example once
    assert sst[:5] != sst[5:]  # a new pass, a new order
    assert sst[:5] != sts  # two tasks of one size do not share an order


def test_a_restored_stream_continues_with_the_batches_it_would_have_given():
    for taken in (3, 5, 7):  # inside the first pass, at its end, inside the second
        straight, resumed = _batches(), _batches()
        for _ in range(taken):
            next(straight.streams["sts"])
        resumed.load_state_dict(straight.state_dict())
        assert [next(resumed.streams["sts"])["index"] for _ in range(6)] == \
            [next(straight.streams["sts"])["index"] for _ in range(6)], taken
