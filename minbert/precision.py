"""Numeric precision: which autocast dtype a device runs natively, and the autocast / grad-scaler pair.

`--amp auto` (every script's default) picks, in this order:
  - CUDA: bf16 where the GPU has it (Ampere and newer), else fp16 with a grad scaler;
  - CPU: bf16 only where the hardware multiplies bf16 natively (AMX, or AVX512-BF16). Elsewhere
    torch emulates bf16 matmuls, about 600x slower than fp32 on an AVX2 CPU, so fp32 it is;
  - MPS and anything else: fp32, the one precision every backend runs correctly.
An explicit `--amp bf16|fp16` is obeyed, with a one-line warning where it will be slow or unsafe.
"""
import contextlib
import functools

import torch

AMP_CHOICES = ("auto", "none", "bf16", "fp16")
AMP_DTYPES = {"none": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def cpu_capability():
    """torch's name for the CPU's best vector ISA: 'AVX2', 'AVX512', 'AMX' (x86), 'SVE'/'DEFAULT' (others)."""
    try:
        return torch.backends.cpu.get_cpu_capability()
    except Exception:  # very old torch
        return "DEFAULT"


@functools.lru_cache(maxsize=1)
def cpu_flags():
    """The CPU feature flags Linux reports (empty elsewhere)."""
    try:
        with open("/proc/cpuinfo") as fp:
            for line in fp:
                if line.startswith(("flags", "Features")):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def cpu_has_native_bf16():
    """True where bf16 matmuls run in hardware: AMX tiles, or AVX512-BF16 dot products."""
    return cpu_capability().upper().startswith("AMX") or bool({"amx_bf16", "avx512_bf16"} & cpu_flags())


def native_precisions(device):
    """The reduced precisions `device` runs natively (fp32 always is)."""
    if device.type == "cuda":
        return ["bf16", "fp16"] if torch.cuda.is_bf16_supported() else ["fp16"]
    if device.type == "cpu":
        return ["bf16"] if cpu_has_native_bf16() else []
    return []


def device_kind(device):
    """A short name for the hardware, for logs and benchmark tables: the GPU's name or the CPU's ISA."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device.type == "cpu":
        return f"CPU {cpu_capability()}" + (" (AVX512-BF16)" if "avx512_bf16" in cpu_flags() else "")
    return device.type.upper()


def resolve_amp(requested, device):
    """(amp, why): the precision to train in ('none', 'bf16' or 'fp16') and one line of reasons."""
    native = native_precisions(device)
    kind = device_kind(device)
    if requested == "auto":
        if native:
            amp = native[0]
            return amp, f"{amp} (auto: {kind} runs it natively)"
        return "none", (f"fp32 (auto: {kind} has no native bf16 matmul; emulated bf16 would be far slower)"
                        if device.type == "cpu" else f"fp32 (auto: no mixed precision on {kind})")
    if requested == "none":
        return "none", "fp32 (--amp none)"
    if requested in native:
        return requested, f"{requested} (--amp {requested})"
    if device.type == "cpu" and requested == "bf16":
        why = f"{kind} has no native bf16 matmul, so torch emulates it: expect it to be much slower than fp32"
    elif device.type == "cpu":
        why = (f"fp16 autocast on the CPU ({kind}) is emulated and slow, and needs loss scaling; use "
               f"--amp auto")
    else:
        why = f"{kind} does not run {requested} natively; results may be slow or inexact"
    return requested, f"{requested} (--amp {requested}; warning: {why})"


def autocast(device, amp):
    """Autocast context for `amp` in {'none', 'bf16', 'fp16'}: matmuls in half precision, the rest fp32."""
    dtype = AMP_DTYPES[amp]
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def grad_scaler(device, amp):
    """fp16 gradients underflow without loss scaling; bf16 and fp32 need none."""
    return torch.amp.GradScaler(device.type, enabled=(amp == "fp16"))
