"""The training step recorded: one CUDA graph per batch shape, replayed for every batch of that shape: the
default under `--use_gpu` (`--no_record_step` runs the eager step), since tools/gpu_check.sh showed it correct
on an NVIDIA H100 and 3-7x faster than the eager step there (docs/hardware.md, RESULTS.md).

On a GPU a small model's step is hundreds of short kernels, each launched by the host, so MiniLM's step is
bound by those launches: the GPU waits on Python. A CUDA graph records the kernels of one step once and
replays them with one launch. What is recorded here is the one training step of step.py, whole: the forward
pass under autocast, the loss with the regularisers the recipe asks for, the backward pass, gradient clipping,
AdamW, the learning-rate schedule and the loss's after-step (the PyTorch blog's "whole-network capture";
NVIDIA's MLPerf BERT replays one graph per shape the same way).

A replay runs the recorded kernels on the recorded memory, with every Python value frozen as it was when it
was recorded. So:
  - Every batch is copied into static input tensors of its shape. There is one graph per shape, and the
    batches come in a few fixed shapes (datasets.set_fixed_shapes): a short batch is filled up with rows
    whose loss weight is 0 (objectives/rows.py).
  - Whatever outlives a step exists before it is recorded: AdamW's moments and step counts
    (optimizer.AdamW.init_state, capturable=True), the learning rate (schedule.DeviceSchedule: 0-d tensors
    rewritten in place from a step-count tensor) and the sums of the loss terms (objectives/losses.py
    TermLoss.track). The gradients do not outlive it: each step starts and ends with none, so the backward
    pass creates them in the graphs' pool and AdamW reads them there. A Part 2 step of one task leaves the
    other heads without a gradient, so AdamW skips them, as it does in the eager step.
  - Dropout draws from the CUDA generator's graph-safe state: each replay advances it as the eager step
    would, so the masks differ at every step and a saved random state resumes exactly.
  - Nothing in the step reads a value back to the host: the loss is summed on the device and read every
    N steps.
All graphs share one memory pool and replay one at a time, in data order rather than the order they were
recorded in: that is safe because a step's only output that lives on, its loss, is read before the next replay
(the Trainer adds it to a sum that existed before recording), and everything else a graph writes in the pool is
a temporary of its own step.

Under --compile the step recorded is made of Inductor's kernels: the forward and backward compile in a shape's
warm-up (prepare, below), and so does AdamW's update (optimizer.AdamW.compile_now), before the recording.

What cannot be recorded is one list, CANNOT_RECORD below, which the flags' resolver (flags/defaults.py), the
Trainer and bench.py all read. A recording that fails at run time raises RecordingFailed, and the Trainer goes
on with the eager step (one line says so).

Without a GPU, `record=False` runs the same path (static inputs, gradients from none to none, the
capturable optimizer and the device schedule) eagerly at every "replay": the tests check on the CPU that it
trains exactly as the eager step does, and on a GPU that the recorded graphs do too.
"""
import contextlib
import time

import torch

from minbert.cli import MinbertError
from minbert.training.schedule import DeviceSchedule


# What the recorded step cannot take: (a setting of the step, whether its value rules recording out, why, in
# one line with the value at {}). cannot_record reads each setting from the run's settings.
CANNOT_RECORD = (
    ("processes", lambda n: n > 1,
     "{} processes: DistributedDataParallel reduces the gradients outside the step"),
    ("amp", lambda amp: amp == "fp16",
     "fp16's loss scaler reads every step's gradients back to skip the steps that overflow"),
    ("grad_accum", lambda n: n > 1, "--grad_accum {} steps the optimizer every few batches"),
    ("surgery", bool, "--{} combines the task gradients on the host"),
    ("every_task", bool, "--sampler all puts a batch of every task in each step"),
    ("unfreezing", bool, "--gradual_unfreeze changes which parameters train during the run"),
    ("optimizer", lambda name: name != "adamw",
     "--optimizer {} reads its learning rate as a number (only AdamW's step takes it from the device)"),
)


def cannot_record(recipe, amp, processes=1, every_task=False):
    """Why the training step of `recipe` (specs.Recipe) at precision `amp` (resolved: none, bf16 or fp16), run
    by `processes` processes, each step a batch of every task or not (`every_task`: Part 2's --sampler all),
    cannot be recorded: one line per reason, [] when it can. The start line, the Trainer and bench.py ask it."""
    step = {"processes": processes, "amp": amp, "grad_accum": recipe.grad_accum, "surgery": recipe.surgery,
            "every_task": every_task, "unfreezing": bool(recipe.gradual_unfreeze), "optimizer": recipe.optimizer}
    return [why.format(step[name]) for name, rules_out, why in CANNOT_RECORD if rules_out(step[name])]


class RecordingFailed(RuntimeError):
    """Recording a batch shape's graph failed (the eager step can still run that batch)."""


def shape_key(batch):
    """What a graph is recorded for: the task, and every tensor's name, shape and dtype (nested dicts flattened)."""
    def walk(prefix, value):
        if isinstance(value, dict):
            for k in sorted(value):
                yield from walk(f"{prefix}{k}.", value[k])
        elif torch.is_tensor(value):
            yield prefix, tuple(value.shape), value.dtype
    return (batch.get("task"), tuple(walk("", batch)))


def static_copy(batch, device):
    """The batch's tensors as fresh tensors on `device` (the graph's inputs); its other values (the task) as
    they are."""
    if isinstance(batch, dict):
        return {k: static_copy(v, device) for k, v in batch.items()}
    return batch.to(device, copy=True) if torch.is_tensor(batch) else batch


def fill(static, batch):
    """Copy a host batch into the static inputs of its shape (asynchronously from pinned memory)."""
    for k, v in batch.items():
        if isinstance(v, dict):
            fill(static[k], v)
        elif torch.is_tensor(v):
            static[k].copy_(v, non_blocking=True)


class RecordedFunction:
    """`fn(static batch) -> tensor` recorded once per batch shape and replayed for every batch of that shape.
    `prepare(static batch)` runs before a shape is recorded (the warm-up). With `record=False`, or off a CUDA
    device, nothing is recorded and every call runs `fn` eagerly on the static inputs (the CPU's stand-in, for
    tests)."""

    def __init__(self, fn, prepare, device, record=True):
        self.fn, self.prepare, self.device = fn, prepare, device
        self.record = record and device.type == "cuda"
        self.entries = {}  # shape key -> (static inputs, graph, its output)
        self.pool = torch.cuda.graph_pool_handle() if self.record else None
        self.seconds = 0.0  # spent warming up and recording

    def __call__(self, batch):
        key = shape_key(batch)
        if key not in self.entries:
            self.entries[key] = self._add(batch)
        static, graph, out = self.entries[key]
        fill(static, batch)
        if graph is None:
            return self.fn(static)
        graph.replay()
        return out

    def _add(self, batch):
        t0 = time.perf_counter()
        static = static_copy(batch, self.device)
        self.prepare(static)
        try:
            graph, out = self.capture(static)
        except Exception as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else "no message"
            raise RecordingFailed(f"recording a new batch shape failed ({type(e).__name__}: {first})") from e
        self.seconds += time.perf_counter() - t0
        return static, graph, out

    def capture(self, static):
        """(the graph of `fn` on `static`, its output tensor); (None, None) where nothing is recorded."""
        if not self.record:
            return None, None
        graph = torch.cuda.CUDAGraph()
        # thread_local: the prefetch thread (prefetch.py) pins the next batches meanwhile, which the default
        # "global" mode would take for an unsafe call during the recording
        with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
            out = self.fn(static)
        torch.cuda.synchronize(self.device)
        return graph, out


@contextlib.contextmanager
def side_stream(device):
    """Run the block on a side stream (a CUDA graph's warm-up must not run on the stream it is recorded from)."""
    if device.type != "cuda":
        yield
        return
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        yield
    torch.cuda.current_stream(device).wait_stream(stream)


class RecordedStep:
    """A step.TrainingStep recorded per batch shape. Called with a host batch, it runs the whole step (forward
    to the loss's after-step) and returns the step's loss (a device tensor, valid until the next call).

    The step's optimizer is made capturable here (its state created now), and its schedule must keep the
    learning rate on the device (schedule.DeviceSchedule): a host schedule's number would be frozen into the
    graph. A state loaded into the optimizer afterwards replaces the tensors the graphs read, so the Trainer
    makes a new RecordedStep then."""

    def __init__(self, step, record=True, warmup=2):
        if step.schedule is not None and not isinstance(step.schedule, DeviceSchedule):
            raise MinbertError(f"the recorded step needs the learning rate on the device (a "
                            f"schedule.DeviceSchedule), not a {type(step.schedule).__name__}, whose number a "
                            "graph would freeze")
        self.step, self.warmup = step, warmup
        step.optimizer.init_state(capturable=True)
        self.recorded = RecordedFunction(self.run, self.prepare, step.device, record)

    def __call__(self, batch):
        return self.recorded(batch)

    def prepare(self, static):
        """Before a shape is recorded: a few forward and backward passes on a side stream (kernels chosen,
        lazy state created, a --compile forward and backward compiled), AdamW's update compiled on their
        gradients under --compile (optimizer.AdamW.compile_now, which leaves every tensor as it was), the
        random states put back and the gradients dropped afterwards."""
        step = self.step
        devices = [step.device] if step.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), step.loss_fn.quiet(), side_stream(step.device):
            for _ in range(self.warmup):
                step.zero_grad()
                step.backward(static)
            step.optimizer.compile_now()  # (AdamW's, as init_state above: no other optimizer is recorded)
        step.zero_grad()

    def run(self, static):
        """The step on the static batch, from no gradients to none: what a graph records. The backward pass
        creates the gradients of the parameters this batch reaches (AdamW skips the others, a Part 2 step's
        other heads, as in the eager step) as temporaries of the graphs' pool, and they are dropped after the
        update: no zeroing pass, no `+=` into kept buffers, nothing that outlives the step."""
        self.step.zero_grad()
        loss = self.step(static)
        self.step.zero_grad()
        return loss
