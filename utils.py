"""Shared helpers: errors and the scripts' entry guard, progress lines without a terminal, seeding, ranks and
device, masks, atomic files, batches to the device."""
import atexit
import hashlib
import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch


class MinbertError(Exception):
    """A user-facing problem: printed as one line by `main_guard`, never as a traceback."""


# What an interrupted run should be told: set by a pipeline each time it saves a resumable checkpoint.
_INTERRUPT_HINT = {"text": None}


def set_interrupt_hint(text):
    _INTERRUPT_HINT["text"] = text


def main_guard(main):
    """Run a script's main(): a MinbertError becomes one line on stderr and exit code 2; Ctrl-C becomes
    one line saying where the last completed checkpoint is and how to resume (exit code 130). Under
    torchrun only rank 0 says it (every rank meets the same bad flag or file). Output is line-buffered, so
    a log file or a batch system shows each line as it is printed."""
    for stream in (sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True)
    rank0 = os.environ.get("RANK", "0") == "0"
    try:
        result = main()
        finish_distributed()
        return result
    except MinbertError as e:
        if rank0:
            print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        if rank0:
            print(f"\ninterrupted: {_INTERRUPT_HINT['text'] or 'nothing was saved yet'}", file=sys.stderr)
        sys.exit(130)


class Progress:
    """Without a terminal (output to a file, nohup, a batch system) tqdm draws nothing, so a plain line goes
    out instead: after the first `first` seconds, then every `every` seconds (step/total, mean loss,
    tokens/s and the time left)."""

    def __init__(self, desc, total, every, terminal, first=10.0):
        self.desc, self.total, self.every = desc, total, every
        self.on = bool(every) and not terminal and is_main()
        self.t0 = self.last = time.perf_counter()
        self.wait = min(first, every)

    def update(self, steps, tokens=None, mean_loss=None):
        """After `steps` of `total`: a line if it is time for one. `mean_loss` is a function (it syncs a GPU)."""
        now = time.perf_counter()
        if not self.on or now - self.last < self.wait:
            return
        self.wait = self.every
        self.last, elapsed = now, now - self.t0
        eta = elapsed / steps * (self.total - steps) if self.total else 0.0
        parts = [f"step {steps}/{self.total}"] + ([f"loss {mean_loss():.4f}"] if mean_loss else []) + (
            [f"{tokens / elapsed:.0f} tokens/s"] if tokens is not None else [])
        print(f"{self.desc}: {', '.join(parts)}, {_clock(elapsed)} elapsed, about {_clock(eta)} left", flush=True)


def _clock(seconds):
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}h{m % 60:02d}m" if m >= 60 else f"{m}m{s:02d}s"


# ----------------------------------------------------------------------------- seeding, device, AMP

def seed_everything(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def distributed():
    """(rank, world_size). Under torchrun this joins the process group: nccl on CUDA, gloo on CPU."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1
    import torch.distributed as dist
    if not dist.is_initialized():
        if torch.cuda.is_available():
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
            # Collectives go by tensor device: nccl for a --use_gpu run, gloo for one kept on the CPU.
            dist.init_process_group("cpu:gloo,cuda:nccl")
        else:
            dist.init_process_group("gloo")
        # Tear the group down before the interpreter does: gloo's threads left alive at exit can abort the
        # process ("terminate called without an active exception") after all its work is done. A clean
        # exit goes through finish_distributed first; this is the fallback for an error exit.
        atexit.register(_destroy_group)
    return dist.get_rank(), world


def _destroy_group():
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def finish_distributed():
    """The end of a torchrun process that completed its work: every rank waits for the others, then the
    group is torn down. Without the wait a rank that finished first (rank 1, while rank 0 still writes
    the outputs) destroys its end of the connections the other still holds, and gloo can abort one of
    them at exit. Error exits skip the wait (torchrun stops the other ranks) and only tear down."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def is_main():
    return distributed()[0] == 0


def barrier():
    if distributed()[1] > 1:
        torch.distributed.barrier()


def main_print(*args, **kw):
    """print on rank 0 only, so that N processes do not say everything N times."""
    if is_main():
        print(*args, **kw)


def get_device(use_gpu):
    if not use_gpu:
        return torch.device("cpu")
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    raise MinbertError("--use_gpu was given but no GPU is visible to PyTorch "
                       f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); "
                       "drop --use_gpu to run on the CPU, or install a CUDA build of torch (see README)")


def extended_attention_mask(attention_mask, dtype):
    """[B, T] 1/0 mask -> [B, 1, 1, T] additive mask: 0 where attended, a large negative where padded."""
    mask = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - mask) * torch.finfo(dtype).min


# ----------------------------------------------------------------------------- files

def atomic_write(path, write_fn, mode="wb"):
    """Write through a temporary sibling and rename, so an interrupted run never leaves half a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, mode) as fp:
        write_fn(fp)
        fp.flush()
        os.fsync(fp.fileno())
    os.replace(tmp, path)
    return path


def append_jsonl(path, record):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fp:
        fp.write(json.dumps(record) + "\n")


def git_blob_id(path):
    """The id `git hash-object` prints: sha1 over 'blob <size>\\0' + content."""
    data = Path(path).read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# ----------------------------------------------------------------------------- the training step

def to_device(batch, device):
    """Move a (nested) batch dict's tensors to `device`; other values (a task name) pass through."""
    if isinstance(batch, dict):
        return {k: to_device(v, device) for k, v in batch.items()}
    if torch.is_tensor(batch):
        return batch.to(device, non_blocking=True)
    return batch


def maybe_compile(model, enabled):
    if not enabled:
        return model
    # Compile the BERT forward only: heads are tiny, and varying batch shapes are marked dynamic.
    model.bert.forward = torch.compile(model.bert.forward, dynamic=True)
    return model
