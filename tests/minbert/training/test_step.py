"""training/step.py: the one training step. A call runs forward, loss, backward, clipping, the optimizer, the
schedule and the loss's after-step, in that order, once each; backward divides by --grad_accum; and it is the
one step there is: the Trainer (eager and recorded) and bench.py both run this class, and no other module of the
training path clips or steps an optimizer."""
import re

import pytest
import torch

from minbert.objectives.losses import TermLoss
from minbert.training.step import TrainingStep
from optimizer import AdamW
from tests.course import ROOT


class Spy(TermLoss):
    """Cross entropy of a linear model, logging the step's events in `events`."""

    def __init__(self, events):
        super().__init__()
        self.events = events

    def forward(self, model, batch):
        self.events.append("forward")
        return torch.nn.functional.cross_entropy(model(batch["x"]), batch["labels"]) * 100

    def after_step(self):
        self.events.append("after_step")


class Schedule:
    def __init__(self, events):
        self.events = events

    def step(self):
        self.events.append("schedule")


def batch():
    g = torch.Generator().manual_seed(0)
    return {"x": torch.randn(8, 4, generator=g) * 10, "labels": torch.randint(0, 3, (8,), generator=g)}


def test_a_step_runs_forward_to_after_step_in_order_and_clips_before_the_optimizer():
    events, norms = [], []
    model = torch.nn.Linear(4, 3)
    optimizer = AdamW(model.parameters(), lr=1e-3)
    real = optimizer.step

    def step(closure=None):
        norms.append(float(torch.cat([p.grad.flatten() for p in model.parameters()]).norm()))
        events.append("optimizer")
        return real(closure)
    optimizer.step = step
    s = TrainingStep(model, Spy(events), optimizer, Schedule(events), max_grad_norm=0.5)
    loss = s(batch())
    assert events == ["forward", "optimizer", "schedule", "after_step"]
    assert norms == [pytest.approx(0.5, rel=1e-4)]
    assert loss.dtype == torch.float32 and not loss.requires_grad
    assert all(p.grad is not None for p in model.parameters())  # left for the caller (recorded.py zeroes them)
    s.zero_grad()
    assert all(p.grad is None for p in model.parameters())


def test_backward_divides_each_loss_by_grad_accum():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    loss = Spy([])
    TrainingStep(model, loss, AdamW(model.parameters()), grad_accum=4).backward(batch())
    quarter = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    TrainingStep(model, loss, AdamW(model.parameters())).backward(batch())
    for q, whole in zip(quarter, (p.grad for p in model.parameters())):
        torch.testing.assert_close(q * 4, whole)


def test_the_training_path_clips_and_steps_an_optimizer_in_one_place():
    """The eager step, the recorded one and bench.py's are one class: no other module of the training path (nor
    bench's candidates) clips gradients or calls an optimizer's step."""
    found = []
    for path in [*(ROOT / "minbert" / "training").glob("*.py"), ROOT / "minbert" / "bench" / "candidate.py"]:
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"clip_grad|\.step\(self\.optimizer\)|optimizer\.step\(|opt\.step\(", line):
                found.append(f"{path.relative_to(ROOT)}:{n}")
    assert [f.split(":")[0] for f in found] == ["minbert/training/step.py"] * 2, found


def test_with_fp16_loss_scaling_clipping_acts_on_the_true_gradients():
    """fp16's scaler multiplies the loss (here by 16) and the step clips the gradients unscaled: a threshold above
    their true norm leaves the step as it is without clipping, one below it shrinks it. Plain SGD, whose step is
    proportional to the gradient (AdamW's first step hardly changes when its gradient is scaled)."""
    def run(max_norm):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 3)
        start = [p.detach().clone() for p in model.parameters()]
        s = TrainingStep(model, Spy([]), torch.optim.SGD(model.parameters(), lr=1e-3), amp="fp16",
                         max_grad_norm=max_norm)
        s.scaler = torch.amp.GradScaler("cpu", init_scale=16.0)  # no overflow in fp16 at this size
        s({"x": b["x"] / 10, "labels": b["labels"]})
        moved = [p.detach().clone() for p in model.parameters()]
        assert not all(torch.equal(a, b) for a, b in zip(start, moved))  # the step was taken, not skipped
        return torch.cat([(b - a).flatten() for a, b in zip(start, moved)])
    b = batch()
    unclipped = run(0.0)
    true_norm = float(unclipped.norm()) / 1e-3  # SGD's step is lr times the gradient
    torch.testing.assert_close(run(2 * true_norm), unclipped)
    clipped = run(true_norm / 4)
    torch.testing.assert_close(clipped.norm(), unclipped.norm() / 4, rtol=1e-2, atol=0)
