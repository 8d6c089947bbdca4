"""Shared helpers: errors, seeding and device, masks, checkpoint I/O, batches to the device, run flags."""
import atexit
import hashlib
import json
import os
import random
import sys
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
    one line saying where the last completed checkpoint is and how to resume (exit code 130)."""
    try:
        return main()
    except MinbertError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print(f"\ninterrupted: {_INTERRUPT_HINT['text'] or 'nothing was saved yet'}", file=sys.stderr)
        sys.exit(130)


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
        # process ("terminate called without an active exception") after all its work is done.
        atexit.register(dist.destroy_process_group)
    return dist.get_rank(), world


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


def save_checkpoint(path, obj):
    return atomic_write(path, lambda fp: torch.save(obj, fp))


def load_checkpoint(path, map_location="cpu"):
    path = Path(path)
    if not path.is_file():
        raise MinbertError(f"{path}: checkpoint not found")
    try:
        return torch.load(path, map_location=map_location, weights_only=False)
    except Exception as e:  # torch raises many kinds for a damaged file
        raise MinbertError(f"{path}: cannot read checkpoint ({type(e).__name__}: {e})") from None


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


def rng_state():
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def set_rng_state(state):
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def require_same_flags(saved, args, flags, source, why):
    """Refuse a checkpoint whose run used other values for `flags` ({attribute: flag as typed}),
    naming each difference."""
    diff = [f"{flag} {saved.get(k)!r} in the checkpoint, {getattr(args, k)!r} given" for k, flag in flags.items()
            if saved.get(k) != getattr(args, k)]
    if diff:
        raise MinbertError(f"{source}: {why}, the checkpoint comes from another configuration: " + "; ".join(diff))


def trainable_state(model):
    """The tensors a fine-tuning run changes: all parameters that require grad (a frozen backbone is
    rebuilt from its pretrained checkpoint, so it need not be saved every epoch)."""
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def load_trainable_state(model, state, source):
    own = dict(model.named_parameters())
    bad = [k for k in state if k not in own or own[k].shape != state[k].shape]
    missing = [n for n, p in own.items() if p.requires_grad and n not in state]
    if bad or missing:
        saved_lora, own_lora = (any(".lora_" in k for k in names) for names in (state, own))
        hint = "" if saved_lora == own_lora else (
            "; the checkpoint holds LoRA/DoRA adapters and this model has none" if saved_lora
            else "; this model has adapters and the checkpoint none") + " (give its --fine-tune-mode)"
        raise MinbertError(f"{source}: checkpoint does not fit this model: "
                           + (f"unknown or mis-shaped {bad[:5]} " if bad else "")
                           + (f"missing {missing[:5]}" if missing else "") + hint)
    with torch.no_grad():
        for k, v in state.items():
            own[k].copy_(v)


def maybe_compile(model, enabled):
    if not enabled:
        return model
    # Compile the BERT forward only: heads are tiny, and varying batch shapes are marked dynamic.
    model.bert.forward = torch.compile(model.bert.forward, dynamic=True)
    return model
