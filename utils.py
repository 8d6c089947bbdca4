"""Shared helpers: errors and the scripts' entry guard, progress lines without a terminal, seeding, ranks and
device, masks, atomic files, batches to the device."""
import argparse
import atexit
import contextlib
import errno
import hashlib
import json
import os
import random
import re
import signal
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import torch


class MinbertError(Exception):
    """A user-facing problem: printed as one line by `main_guard`, never as a traceback."""


class Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is a MinbertError: one line naming the flag, no usage dump."""

    def __init__(self, *a, **kw):
        kw.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*a, **kw)

    def error(self, message):
        raise MinbertError(f"{self.prog}: {message}")


# What an interrupted run should be told: set by a pipeline each time it saves a resumable checkpoint. `retry`
# is the command that continues the run (e.g. "the same command plus --resume --run_name r"), which a failed
# write (a full disk) names too: once a run folder holds files, the plain same command is refused there.
_INTERRUPT_HINT = {"text": None, "retry": None}


def set_interrupt_hint(text, retry=None):
    _INTERRUPT_HINT.update(text=text, retry=retry)


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
    except (MemoryError, RuntimeError) as e:
        line = out_of_memory(e)
        if line is None:
            raise  # a bug: its traceback is what a report needs
        rank = os.environ.get("RANK", "0")  # a rank runs out on its own, so each one says so
        print(f"error: {'' if rank == '0' else f'rank {rank}: '}{line}", file=sys.stderr)
        sys.exit(2)


def out_of_memory(e):
    """The one line for an allocation that failed (torch on the CPU or a GPU, or Python), or None for another error.
    What was saved stays as it was: checkpoints are written whole or not at all (atomic_write)."""
    text = str(e)
    if not isinstance(e, MemoryError) and not re.search(r"can't allocate memory|out of memory", text, re.I):
        return None
    where = "the GPU" if "cuda" in text.lower() else "this machine"
    size = re.search(r"allocate (\d+) bytes", text)
    size = (f"{int(size.group(1)) / 2 ** 30:,.1f} GiB" if size else
            next(iter(re.findall(r"[Tt]ried to allocate ([\d.]+ [KMGT]?i?B)", text)), None))
    what = f"torch could not allocate {size}" if size else "an allocation failed"
    return (f"out of memory: {what} on {where}; the model or a batch is larger than it holds: lower --batch_size or "
            f"--max_length, or a size you gave (a width, rank or length flag)")


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
    group is torn down, and the process exits (status 0) without the interpreter's shutdown. Without the wait
    a rank that finished first (rank 1, while rank 0 still writes the outputs) destroys its end of the
    connections the other still holds, and gloo can abort one of them at exit. Error exits skip the wait
    (torchrun stops the other ranks) and only tear down."""
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
        # Even so, gloo still (rarely) aborts a rank while the interpreter shuts down, after every output is
        # written: "terminate called without an active exception", exit -6, and torchrun reports the run as
        # failed. Every file is closed by now, so the rank leaves without that shutdown.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


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

_DEFER = {"depth": 0, "caught": False}


@contextlib.contextmanager
def deferred_interrupt():
    """Ctrl-C (SIGINT) waits until the block ends: a file being written is completed, then the
    KeyboardInterrupt is raised. Without this, an interrupt inside torch.save leaves torch's zip writer
    half-closed, and the traceback of its second error replaces the one-line message. Nested blocks defer
    to the outermost. Signal handlers can be set from the main thread only; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _DEFER["depth"]:
        _DEFER["depth"] += 1
        try:
            yield
        finally:
            _DEFER["depth"] -= 1
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: _DEFER.update(caught=True))
    _DEFER.update(depth=1, caught=False)
    try:
        yield
    finally:
        _DEFER["depth"] = 0
        signal.signal(signal.SIGINT, previous)
        if _DEFER["caught"]:
            _DEFER["caught"] = False
            raise KeyboardInterrupt


def write_error(path, e):
    """One line for an OSError met while writing `path` (a full disk, a file-size limit, no permission)."""
    why = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is used up",
           errno.EFBIG: "the file would exceed the size limit", errno.EACCES: "permission denied",
           errno.EROFS: "the file system is read-only"}.get(getattr(e, "errno", None), e.strerror or str(e))
    retry = f"then run {_INTERRUPT_HINT['retry']}" if _INTERRUPT_HINT["retry"] else "run the same command again"
    return MinbertError(f"{path}: cannot write it: {why}; the file there before (if any) is unchanged and no "
                        f"partial file is left; make room and {retry}")


def process_alive(pid):
    """Whether process `pid` on this machine may still be running (one we may not signal counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def atomic_write(path, write_fn, mode="wb"):
    """Write through a temporary sibling and rename, so an interrupted run never leaves half a file: Ctrl-C
    waits for the write to finish (deferred_interrupt), and a failed write (a full disk) removes the
    temporary file and is one line naming the file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with deferred_interrupt():
        try:
            with open(tmp, mode) as fp:
                write_fn(fp)
                fp.flush()
                os.fsync(fp.fileno())
            os.replace(tmp, path)
        except BaseException as e:
            tmp.unlink(missing_ok=True)
            cause = e if isinstance(e, OSError) else e.__context__ if isinstance(e.__context__, OSError) else None
            if cause is not None:  # torch.save re-raises a failed write as a RuntimeError of its own
                raise write_error(path, cause) from None
            raise
    return path


def append_jsonl(path, record):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with deferred_interrupt(), open(path, "a") as fp:
            fp.write(json.dumps(record) + "\n")
    except OSError as e:
        raise write_error(path, e) from None


def file_digest(path):
    """The sha256 of a file's bytes (hex)."""
    with open(path, "rb") as fp:
        return hashlib.file_digest(fp, "sha256").hexdigest()


def git_blob_id(path):
    """The id `git hash-object` prints: sha1 over 'blob <size>\\0' + content."""
    data = Path(path).read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


# ----------------------------------------------------------------------------- loading tensors safely

def _refused_global(message):
    """The 'module.name' torch's restricted unpickler refused, from its message (the wording changed
    between torch releases: 'Unsupported global: GLOBAL x.y', 'unsupported GLOBAL x.y whose module ...')."""
    m = re.search(r"[Uu]nsupported (?:global: )?GLOBAL ([\w.]+)", message)
    return m.group(1) if m else None


# torch's restricted (weights_only) unpickler could be made to run code from the file before 2.6
# (CVE-2025-32434); with an older torch (setup.sh MINBERT_TORCH=skip keeps the one installed) nothing is loaded.
SAFE_LOADER_TORCH = (2, 6)


def torch_release(version=None):
    """(major, minor) of a torch version string ('2.13.0+cpu' -> (2, 13))."""
    m = re.match(r"(\d+)\.(\d+)", str(version or torch.__version__))
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def safe_load(path, what="checkpoint", map_location="cpu", allowed=(), advice=""):
    """torch.load(path, weights_only=True): tensors and plain values only, so loading runs no code of the
    file's. `allowed` are further classes the caller trusts (safe_globals). Returns (object, None), or
    (None, 'module.name') when the file holds a Python object outside `allowed`: the caller refuses it
    (refuse_code) or knows another reading. A damaged file is one line (`advice` appended); torch's own
    advice to load the file unrestricted never reaches the user. With a torch older than
    SAFE_LOADER_TORCH the file is not opened at all: that torch's restricted loader is not restricted."""
    import pickle
    if torch_release() < SAFE_LOADER_TORCH:
        raise MinbertError(f"{path}: not loaded: torch {torch.__version__} can be made to run code from a file it "
                           f"loads, even with weights_only=True (CVE-2025-32434, fixed in torch 2.6); install "
                           f"torch>=2.6 (setup.sh installs 2.13.0)")
    try:
        # torch warns (several lines) about a pickle protocol its restricted loader does not read, then fails:
        # the failure is the one line below, the warning would only bury it.
        with torch.serialization.safe_globals(list(allowed)), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.load(path, map_location=map_location, weights_only=True), None
    except pickle.UnpicklingError as e:
        culprit = _refused_global(str(e))
        if culprit is None:
            raise MinbertError(f"{path}: cannot read {what} (damaged, or not a file torch.save wrote){advice}") from None
        return None, culprit
    except Exception as e:  # torch raises many kinds for a damaged file
        lines = [l.strip() for l in str(e).splitlines() if l.strip()]
        raise MinbertError(f"{path}: cannot read {what} ({type(e).__name__}: "
                           f"{lines[0][:200] if lines else 'no detail'}){advice}") from None


def refuse_code(path, culprit):
    """The one line for a file holding a Python object that loading would have to build (run)."""
    return MinbertError(f"{path}: refused: the file holds Python objects that loading would have to run "
                        f"({culprit}); nothing in it was run. Checkpoints and weights hold only tensors and plain values, "
                        f"so this file is not one, or it was altered")


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
