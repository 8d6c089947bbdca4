"""The whole training step replayed as one CUDA graph per batch shape (`--use_gpu`;
`--no_cuda_graphs` turns it off).

On a GPU a small model's step is hundreds of short kernels, each launched by the host: MiniLM's step is
launch-bound (the GPU waits on Python). A CUDA graph records the kernels of one step once and replays them
with one launch. What is recorded here is everything one optimizer step does: the forward pass under
autocast, the loss with the regularisers the recipe asks for, the backward pass, gradient clipping, AdamW and
the learning-rate schedule (the PyTorch blog's "whole-network capture"; NVIDIA's MLPerf BERT replays one
graph per shape the same way).

A replay runs the recorded kernels on the recorded memory, with every Python
value frozen at recording time. So:
  - every batch is copied into static input tensors of its shape (one graph per shape: the batches have a few
    fixed
    shapes, datasets.set_fixed_shapes; a short batch is filled up with rows of loss weight 0,
    objectives/rows.py);
  - whatever outlives a step exists before recording: the gradients (one buffer per parameter, shared by every
    graph, zeroed inside the step), AdamW's moments and step count (optimizer.AdamW.init_state,
    capturable=True) and the learning rate (schedule.DeviceSchedule: 0-d tensors rewritten in place from a
    step-count tensor), the loss terms' sums (objectives/losses.py TermLoss.track);
  - a graph's own parameters are those that get a gradient from its batch shape and task (a Part 2 step of one
    task
    leaves the other heads without one, so AdamW skips them, as in eager mode): found in the warm-up before
    recording;
  - dropout draws from the CUDA generator's graph-safe state: each replay advances it as the eager step would,
    so masks differ at every step and a saved random state resumes exactly;
  - nothing in the step reads a value back to the host (the loss is summed on the device, read every N steps).
All graphs share one memory pool; a step's temporaries are reused across graphs, which replay one at a time.

Without a GPU, `Graphs(..., record=False)` runs the same path (static buffers, in-step zeroing, the capturable
optimizer and schedule) eagerly at every "replay": the tests check on the CPU that it trains exactly as the
eager step does, and on a GPU that the recorded graphs do too.
"""
import contextlib
import time

import torch

from minbert.precision import autocast


def shape_key(batch):
    """What a graph is recorded for: the task, and every tensor's name, shape and
    dtype (nested dicts flattened)."""
    def walk(prefix, value):
        if isinstance(value, dict):
            for k in sorted(value):
                yield from walk(f"{prefix}{k}.", value[k])
        elif torch.is_tensor(value):
            yield prefix, tuple(value.shape), value.dtype
    return (batch.get("task"), tuple(walk("", batch)))


def static_copy(batch, device):
    """The batch's tensors as fresh tensors on `device` (the graph's inputs); other
    values (the task) as they are."""
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


class Graphs:
    """One recorded `step(static batch) -> tensor` per batch shape, replayed for every batch of that shape.
    `prepare(static batch)` runs before a shape is recorded (the warm-up); `record=False` replays by running
    the step eagerly (the CPU's stand-in, for tests)."""

    def __init__(self, step, prepare, device, record=True):
        self.step, self.prepare, self.device = step, prepare, device
        self.record = record and device.type == "cuda"
        self.entries = {}
        self.pool = torch.cuda.graph_pool_handle() if self.record else None
        self.seconds = 0.0  # spent warming up and recording

    def __call__(self, batch):
        key = shape_key(batch)
        if key not in self.entries:
            self.entries[key] = self._add(batch)
        static, graph, out = self.entries[key]
        fill(static, batch)
        if graph is None:
            return self.step(static)
        graph.replay()
        return out

    def _add(self, batch):
        t0 = time.perf_counter()
        static = static_copy(batch, self.device)
        self.prepare(static)
        graph = out = None
        if self.record:
            graph = torch.cuda.CUDAGraph()
            # thread_local: the prefetch thread (trainer.prefetch) pins the next batches meanwhile, which the
            # default "global" mode would take for an unsafe call during the recording
            with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
                out = self.step(static)
            torch.cuda.synchronize(self.device)
        self.seconds += time.perf_counter() - t0
        return static, graph, out


@contextlib.contextmanager
def side_stream(device):
    """Run the block on a side stream (a CUDA graph's warm-up must not run on the
    stream it is recorded from)."""
    if device.type != "cuda":
        yield
        return
    stream = torch.cuda.Stream(device)
    stream.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(stream):
        yield
    torch.cuda.current_stream(device).wait_stream(stream)


class CapturedTraining:
    """The training step as Graphs: forward, loss (an objectives.losses.TermLoss), backward, clipping, the
    optimizer and its schedule, the loss's after-step update (SMART's Bregman teacher); called with a host
    batch, it returns the step's loss (a device tensor, valid until the next call)."""

    def __init__(self, model, loss_module, loss_fn, optimizer, schedule, device, amp="none",
                 max_grad_norm=0.0, record=True, warmup=2):
        self.model, self.loss_module, self.loss_fn = model, loss_module, loss_fn
        self.optimizer, self.schedule, self.device, self.amp = optimizer, schedule, device, amp
        self.max_grad_norm, self.warmup = max_grad_norm, warmup
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.grads = {}  # parameter -> its gradient buffer, shared by every graph
        self.used = {}  # shape key -> the parameters that get a gradient there
        optimizer.init_state(capturable=True)
        self.graphs = Graphs(self.step, self.prepare, device, record)

    def __call__(self, batch):
        return self.graphs(batch)

    @property
    def seconds(self):
        return self.graphs.seconds

    def loss(self, batch):
        # The autocast region opens and closes inside the recorded step, so its cache of bf16 weights (each
        # weight cast once a step, both R-Drop passes included) is a temporary of the step like any other.
        with autocast(self.device, self.amp):
            return self.loss_module(self.loss_fn, batch)

    def prepare(self, static):
        """Before a shape is recorded: a few forward and backward passes on a side stream (kernels chosen,
        lazy state created), random states put back afterwards, and the gradients set up: this shape's
        parameters get their shared buffer, the others none."""
        devices = [self.device] if self.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices), self.loss_fn.quiet(), side_stream(self.device):
            for p in self.params:
                p.grad = None
            for _ in range(self.warmup):
                self.loss(static).backward()
            used = [p for p in self.params if p.grad is not None]
        for p in used:
            if p not in self.grads:
                self.grads[p] = torch.zeros_like(p)
        self.used[shape_key(static)] = used

    def step(self, static):
        """One optimizer step on the static batch; what the graph records. Its parameters hold their gradient
        buffers, the others none (so that AdamW skips them, as an eager step does)."""
        used = self.used[shape_key(static)]
        for p in self.params:
            p.grad = None
        for p in used:
            p.grad = self.grads[p]
        torch._foreach_zero_([p.grad for p in used])
        loss = self.loss(static)
        loss.backward()
        if self.max_grad_norm:
            torch.nn.utils.clip_grad_norm_(used, self.max_grad_norm)
        self.optimizer.step()
        self.schedule.step()
        self.loss_fn.after_step()
        return loss.detach().float()
