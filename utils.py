"""Shared helpers: seeding, ranks and device, masks, batches to the device; and, from minbert/cli.py (which
needs no torch), the one-line error, the parser, the scripts' entry guard and progress lines. (Files written
whole and loaded safely: minbert/files.py.)"""
import atexit
import os
import random

import numpy as np
import torch

from minbert.cli import (MinbertError, Parser, PipeSafe, Progress, finish_distributed, interrupt_retry,  # noqa: F401
                         is_main, main_guard, main_print, out_of_memory, process_alive,
                         set_interrupt_hint)
from minbert.specs import Recipe

# tqdm's `disable` for a progress bar: None shows it on a terminal and keeps it out of a log file, as every bar of
# the project does (the starter's TQDM_DISABLE, which classifier.py and multitask_classifier.py re-export)
TQDM_DISABLE = None


# ----------------------------------------------------------------------------- seeding, ranks, device

def seed_everything(seed=Recipe.seed):
    """Seed Python's, NumPy's and torch's generators (torch's seeds every device's); the default is --seed's."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def local_rank():
    """This process's number on its node (torchrun's LOCAL_RANK; 0 outside torchrun)."""
    return int(os.environ.get("LOCAL_RANK", "0"))


def distributed():
    """(rank, world_size). Under torchrun this joins the process group: nccl on CUDA, gloo on CPU."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return 0, 1
    import torch.distributed as dist
    if not dist.is_initialized():
        if torch.cuda.is_available():
            local = local_rank()
            if local < torch.cuda.device_count():  # a CPU run may start more processes than the node has GPUs
                torch.cuda.set_device(local)
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


def barrier():
    if distributed()[1] > 1:
        torch.distributed.barrier()


def get_device(use_gpu):
    if not use_gpu:
        return torch.device("cpu")
    if torch.cuda.is_available():
        local, count = local_rank(), torch.cuda.device_count()
        if local >= count:
            raise MinbertError(f"--use_gpu: this is process {local} on its node, which has {count} GPU(s): "
                               f"start at most {count} (torchrun --nproc_per_node "
                               f"{count}), or drop --use_gpu to run on the CPU")
        return torch.device("cuda", local)
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    raise MinbertError("--use_gpu was given but no GPU is visible to PyTorch "
                       f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'}); "
                       "drop --use_gpu to run on the CPU, or install a CUDA build of torch (see README)")


def extended_attention_mask(attention_mask, dtype):
    """[B, T] 1/0 mask -> [B, 1, 1, T] additive mask: 0 where attended, a large negative where padded."""
    mask = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - mask) * torch.finfo(dtype).min


# ----------------------------------------------------------------------------- processes

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
    # Compile the backbone's forward only (BERT's or GPT-2's, the model's `backbone`): heads are tiny, and
    # varying batch shapes are marked dynamic.
    net = model.backbone
    net.forward = torch.compile(net.forward, dynamic=True)
    return model
