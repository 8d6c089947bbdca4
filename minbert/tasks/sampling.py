"""Which task each Part 2 training step takes, and each task's endless stream of batches.

Samplers (`--sampler`, `--sequential`), for training-set sizes N_i:
  - proportional: p_i = N_i / sum_j N_j, every step drawn independently;
  - annealed (Stickland & Murray 2019, section 4): p_i proportional to N_i^alpha with
    alpha = 1 - 0.8 (e - 1) / (E - 1) at epoch e = 1..E, from proportional towards uniform;
  - round-robin: SST, Quora, STS, SST, ...;
  - all: one batch of every task in each step (their losses summed, or combined by PCGrad);
  - sequential: each task's whole training set, one task after the other.

Each epoch's schedule is drawn from a generator seeded by (seed, epoch), so it needs no saved state; the
streams do: where each task's current shuffled pass stands, which `state_dict` records so that a
resumed run continues with exactly the batches the uninterrupted run would have taken.
"""
import numpy as np

from datasets import batch_indices
from minbert.cli import MinbertError


def annealed_alpha(epoch, epochs):
    """Stickland & Murray's annealing: alpha = 1 - 0.8 (e - 1) / (E - 1), e = 1..E (`epoch` counts from 0)."""
    return 1.0 if epochs == 1 else 1.0 - 0.8 * epoch / (epochs - 1)


def task_schedule(sizes, mode, steps, epoch, epochs, rng, batch_size):
    """The task of every step of one epoch. `sizes` maps task -> number of training examples."""
    tasks = list(sizes)
    if mode == "sequential":  # every task's training set, one task after another
        full = {t: -(-sizes[t] // batch_size) for t in tasks}
        scale = steps / sum(full.values())  # a step budget shrinks (or grows) every task's share alike
        return [t for t in tasks for _ in range(round(full[t] * scale))]
    if mode == "round-robin":
        return [tasks[i % len(tasks)] for i in range(steps)]
    if mode == "all":  # one batch of every task per step: as many batches as the other samplers
        return ["all"] * -(-steps // len(tasks))
    n = np.array([sizes[t] for t in tasks], dtype=np.float64)
    p = n if mode == "proportional" else n ** annealed_alpha(epoch, epochs)
    return list(rng.choice(tasks, size=steps, p=p / p.sum()))


class TaskStream:
    """Endless batches of one task: a new bucketed, shuffled pass whenever one runs out."""

    def __init__(self, data, batch_size, seed, bucket, rank=0, world_size=1):
        self.data, self.batch_size, self.seed, self.bucket = data, batch_size, seed, bucket
        self.rank, self.world_size = rank, world_size
        self.passes, self.cursor, self.order = 0, 0, []

    def _pass(self, number):
        return batch_indices(self.data.lengths, self.batch_size, True, self.seed * 7919 + number, self.bucket)

    def __next__(self):
        if self.cursor == len(self.order):
            self.order, self.cursor = self._pass(self.passes), 0
            self.passes += 1
            if not self.order:
                raise MinbertError(f"{self.data.task.name}: no training batches")
        idx = self.order[self.cursor]
        self.cursor += 1
        return self.data.rank_batch(idx, self.rank, self.world_size)

    def state_dict(self):
        return {"passes": self.passes, "cursor": self.cursor}

    def load_state_dict(self, state):
        self.passes, self.cursor = state["passes"], state["cursor"]
        self.order = self._pass(self.passes - 1) if self.passes else []


class MultitaskBatches:
    """Part 2's training batches: each epoch's task schedule, served from one TaskStream per task."""

    def __init__(self, train, batch_size, seed, mode, epochs, steps=None, bucket=True, rank=0, world_size=1):
        self.sizes = {t: len(d) for t, d in train.items()}
        self.batch_size, self.seed, self.mode, self.epochs = batch_size, seed, mode, epochs
        # default budget: one pass's worth of batches over every task
        self.steps = steps or sum(-(-n // batch_size) for n in self.sizes.values())
        self.streams = {t: TaskStream(d, batch_size, seed + i, bucket, rank, world_size)
                        for i, (t, d) in enumerate(train.items())}
        self.steps_per_epoch = len(self.schedule(0))

    def schedule(self, epoch):
        rng = np.random.default_rng(self.seed * 1000 + epoch)
        return task_schedule(self.sizes, self.mode, self.steps, epoch, self.epochs, rng, self.batch_size)

    def counts(self, schedule):
        """Batches each task gets in an epoch of `schedule` (a step of 'all' counts for every task)."""
        return {t: schedule.count(t) + schedule.count("all") for t in self.streams}

    def _next(self, task):
        batch = next(self.streams[task])
        batch["task"] = task
        return batch

    def epoch(self, epoch):
        """(batches, number of steps, batches per task) of one epoch."""
        schedule = self.schedule(epoch)

        def batches():
            for task in schedule:
                yield ({"task": "all", "parts": {t: self._next(t) for t in self.streams}} if task == "all"
                       else self._next(task))
        return batches(), len(schedule), self.counts(schedule)

    def state_dict(self):
        return {t: s.state_dict() for t, s in self.streams.items()}

    def load_state_dict(self, state):
        for t, s in self.streams.items():
            s.load_state_dict(state[t])
