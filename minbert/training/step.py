"""One training step, written once: the forward pass under autocast, the loss, the backward pass (per-task
gradients combined by PCGrad or GradVac when a step holds every task; fp16's loss scaling), gradient clipping,
the optimizer, the learning-rate schedule and the loss's after-step (SMART's Bregman teacher).

Three callers run this same object. The Trainer (trainer.py) calls it eagerly, `backward` on every batch
and `update` after every --grad_accum of them, or has it recorded whole as one CUDA graph per batch shape
and replayed (recorded.py); bench.py times it (minbert/bench/candidate.py). So the eager step, the recorded
one and the one bench.py measures cannot drift apart: there is one of them.
"""
import torch
from torch.profiler import record_function

from minbert.objectives.pcgrad import task_gradients_backward
from minbert.precision import autocast, grad_scaler


class TrainingStep:
    """One optimizer step of `model` on a batch already on the device, minimising `loss_fn` (an
    objectives.losses.TermLoss: a batch's loss, or {task: loss} for a batch holding every task).

    `forward(loss_fn, batch)` runs the loss (default `loss_fn(model, batch)`; the Trainer gives its
    DistributedDataParallel wrapper); `surgery` combines the task gradients of a step holding every task
    (objectives/pcgrad.PCGrad or objectives/gradvac.GradVaccine), drawing its task order from `generator`;
    `world_size` > 1 weights each rank's loss so that the ranks together make the global batch's mean."""

    def __init__(self, model, loss_fn, optimizer, schedule=None, device=torch.device("cpu"), amp="none",
                 max_grad_norm=0.0, grad_accum=1, surgery=None, generator=None, world_size=1,
                 forward=None):
        self.model, self.loss_fn, self.optimizer, self.schedule = model, loss_fn, optimizer, schedule
        self.device, self.amp, self.max_grad_norm, self.grad_accum = device, amp, max_grad_norm, grad_accum
        self.surgery, self.generator, self.world_size = surgery, generator, world_size
        self.forward = forward or (lambda fn, batch: fn(model, batch))
        self.scaler = grad_scaler(device, amp)

    @property
    def params(self):
        """The parameters that train now (--gradual_unfreeze changes them between epochs)."""
        return [p for p in self.model.parameters() if p.requires_grad]

    def __call__(self, batch):
        """The whole step on `batch`: backward, then update; returns the loss (what recorded.py records). The
        gradients are left where the backward pass put them: an eager caller then calls zero_grad."""
        loss, _ = self.backward(batch)
        self.update()
        return loss.detach().float()

    def backward(self, batch):
        """The forward and backward passes of one batch of an accumulation group: (its loss, what the gradient
        surgery did). The gradients add up over the group's batches, each loss divided by --grad_accum."""
        with record_function("forward"), autocast(self.device, self.amp):
            loss = self.forward(self.loss_fn, batch)
        with record_function("backward"):
            if isinstance(loss, dict) and self.surgery is not None:  # every task's batch in this step
                n = task_gradients_backward([l / self.grad_accum for l in loss.values()], self.params,
                                            lambda grads: self.surgery.combine(grads, self.generator),
                                            self.scaler)
                return sum(loss.values()), n
            if isinstance(loss, dict):  # every task's batch, losses summed (one process only: weight 1)
                loss, weight = sum(loss.values()), 1.0
            elif self.world_size == 1:
                weight = 1.0
            else:
                # A rank holds `local` of the global batch's examples; DDP averages over ranks, so this weight
                # makes the result the global batch's mean even when the last batch splits unevenly.
                weight = 0.0 if batch.get("ghost") else (
                    len(batch["index"]) * self.world_size / batch.get("global_size", len(batch["index"])))
            scale = weight / self.grad_accum
            # (x * 1.0 is x, so one plain step leaves the multiplication out: one kernel less, the same bits)
            self.scaler.scale(loss * scale if scale != 1.0 else loss).backward()
        return loss, 0

    def update(self):
        """After an accumulation group's backward passes: clipping, the optimizer step, the schedule's step
        and the loss's after-step."""
        with record_function("optimizer"):
            if self.max_grad_norm:
                self.scaler.unscale_(self.optimizer)  # clip the true gradients, not the fp16-scaled ones
                torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
            self.scaler.step(self.optimizer)
            self.scaler.update()
            if self.schedule is not None:
                self.schedule.step()
            self.loss_fn.after_step()

    def zero_grad(self):
        """The eager step's gradients dropped after an update (the recorded step drops its own inside each
        step: recorded.py)."""
        with record_function("optimizer"):
            self.optimizer.zero_grad(set_to_none=True)
