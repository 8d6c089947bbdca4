"""training/prefetch.py: batches come in their order, and an error building one reaches the consumer."""
import pytest
import torch

from minbert.training.prefetch import prefetch


def test_prefetch_keeps_order_and_raises_errors():
    cpu = torch.device("cpu")
    assert list(prefetch(iter(range(100)), cpu)) == list(range(100))

    def broken():
        yield 1
        raise ValueError("bad batch")
    with pytest.raises(ValueError, match="bad batch"):
        list(prefetch(broken(), cpu))
