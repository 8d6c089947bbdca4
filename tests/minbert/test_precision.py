"""precision.py: --amp auto picks bf16 only where the CPU runs it natively; an explicit precision the hardware
runs badly warns in one line; fp16 gets a grad scaler, bf16 none."""
import pytest
import torch

from minbert import precision
from minbert.precision import grad_scaler

CPU = torch.device("cpu")


@pytest.mark.parametrize("capability, flags, expected", [
    ("AVX2", set(), "none"),                      # AMD EPYC / older Intel: bf16 would be emulated
    ("AVX512", {"avx512f"}, "none"),              # AVX-512 without its BF16 extension
    ("AVX512", {"avx512f", "avx512_bf16"}, "bf16"),
    ("AMX", {"amx_bf16", "amx_tile"}, "bf16"),
])
def test_auto_picks_bf16_only_where_the_cpu_runs_it_natively(monkeypatch, capability, flags, expected):
    monkeypatch.setattr(precision, "cpu_capability", lambda: capability)
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset(flags))
    amp, why = precision.resolve_amp("auto", CPU)
    assert amp == expected and why.startswith("fp32 (auto" if expected == "none" else "bf16 (auto")
    assert capability in why


def test_explicit_bf16_without_native_support_runs_but_warns_in_one_line(monkeypatch):
    monkeypatch.setattr(precision, "cpu_capability", lambda: "AVX2")
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset())
    lines = []
    amp, why = precision.resolve_amp("bf16", CPU)
    lines.append(f"precision: {why}")
    assert amp == "bf16"
    assert len(lines) == 1 and "warning" in lines[0] and "much slower than fp32" in lines[0]
    lines.append(f"precision: {precision.resolve_amp('fp16', CPU)[1]}")
    assert "warning" in lines[1] and "fp16" in lines[1]
    lines.append(f"precision: {precision.resolve_amp('none', CPU)[1]}")
    assert lines[2] == "precision: fp32 (--amp none)"


def test_fp16_uses_a_grad_scaler_and_bf16_does_not():
    cpu = torch.device("cpu")
    assert grad_scaler(cpu, "fp16").is_enabled()
    assert not grad_scaler(cpu, "bf16").is_enabled() and not grad_scaler(cpu, "none").is_enabled()
