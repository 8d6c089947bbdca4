"""dropout.py: bulk masks keep each element at the rate asked for (to 2^-17) and scale so that the expectation is
the input; neighbouring elements (which share one 64-bit draw) are independent; masks differ from call to call and
seed to seed and repeat with the seed; the gradient is the same mask; eval mode, a GPU-less fallback and p 0 or 1
behave as nn.Dropout."""
import math

import pytest
import torch
import torch.nn.functional as F

from minbert.dropout import Dropout, keep_mask
from tests.processes import DEVICES


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5])
def test_the_keep_rate_and_the_expectation_are_the_ones_asked_for(p):
    torch.manual_seed(0)
    n = 1 << 20
    mask, kept = keep_mask((n,), p)
    assert mask.dtype == torch.bool and abs(kept - (1 - p)) <= 2 ** -17
    sigma = math.sqrt(kept * (1 - kept) / n)
    assert abs(mask.float().mean().item() - kept) < 5 * sigma
    drop = Dropout(p).train()
    x = torch.full((n,), 3.0)
    assert abs(drop(x).mean().item() - 3.0) < 5 * 3.0 * math.sqrt((1 - kept) / kept / n)  # E[y] = x
    kept_values = drop(x).unique()
    assert sorted(kept_values.tolist()) == pytest.approx([0.0, 3.0 / kept])


def test_neighbouring_elements_are_independent():
    torch.manual_seed(1)
    mask, kept = keep_mask((1 << 20,), 0.3)
    m = mask.float()
    for lag in (1, 2, 3, 4, 5):  # elements 0-3 of one draw share its 64 bits; 4 onwards come from the next draw
        both = (m[:-lag] * m[lag:]).mean().item()
        assert abs(both - kept ** 2) < 5 * math.sqrt(kept ** 2 * (1 - kept ** 2) / m.numel()), lag


def test_masks_differ_between_calls_and_seeds_and_repeat_with_the_seed():
    drop = Dropout(0.1).train()
    x = torch.ones(64, 384)
    torch.manual_seed(5)
    a, b = drop(x), drop(x)
    torch.manual_seed(6)
    c = drop(x)
    torch.manual_seed(5)
    again = drop(x)
    assert not torch.equal(a, b) and not torch.equal(a, c)
    assert torch.equal(a, again)


def test_the_gradient_is_the_mask_scaled():
    torch.manual_seed(2)
    drop = Dropout(0.25).train()
    x = torch.randn(8, 100, requires_grad=True)
    y = drop(x)
    y.sum().backward()
    mask = y != 0
    torch.testing.assert_close(x.grad, mask.float() * (1 / (1 - round(0.25 * 65536) / 65536)))
    torch.testing.assert_close(y, x.detach() * x.grad)


def test_outside_training_or_when_switched_off_it_is_torchs_dropout():
    x = torch.randn(16, 32)
    assert torch.equal(Dropout(0.3).eval()(x), x)
    torch.manual_seed(3)
    ours = Dropout(0.3, fast=False).train()(x)
    torch.manual_seed(3)
    assert torch.equal(ours, F.dropout(x, 0.3, True))
    assert torch.equal(Dropout(0.0).train()(x), x)
    assert torch.equal(Dropout(1.0).train()(x), torch.zeros_like(x))
    half = Dropout(0.1).train()(x.bfloat16())
    assert half.dtype == torch.bfloat16


@pytest.mark.parametrize("device", DEVICES)
def test_bulk_masks_on_the_cpu_only_and_torchs_fused_dropout_on_a_gpu(device):
    """The bulk draw pays on the CPU alone; on a GPU the same module runs torch's dropout, seed for seed."""
    drop = Dropout(0.3).train()
    x = torch.randn(64, 384, device=device)
    assert drop.bulk(x) == (device == "cpu")
    if device == "cuda":
        torch.manual_seed(4)
        ours = drop(x)
        torch.manual_seed(4)
        assert torch.equal(ours, F.dropout(x, 0.3, True))
