"""bench/matmul_floor.py: the floor times the matrix products bench.py counts (three times the forward's FLOPs), in the
run's precision, and the optimizer step; its parts add up."""
import pytest
import torch

from config import BertConfig
from minbert.bench.candidate import Candidate, flops_per_batch
from minbert.bench.matmul_floor import products, step_floor
from minbert.specs import BenchSettings, Runtime
from tests.checkpoints import tiny_config, write_vocab
from tokenizer import BertTokenizer


def _flops(pairs):
    return sum(2 * a.shape[-2] * a.shape[-1] * b.shape[-1] * (a.shape[0] if a.dim() == 3 else 1) for a, b in pairs)


@pytest.mark.parametrize("B, T", [(4, 16), (3, 7)])
def test_the_products_are_the_forwards_flops_three_times_and_each_product_is_defined(B, T):
    cfg = tiny_config()
    pairs = products(cfg, B, T, torch.bfloat16, torch.device("cpu"))
    batch = {"x": {"input_ids": torch.zeros(B, T, dtype=torch.long)}}
    assert _flops(pairs["forward"]) == flops_per_batch(cfg, batch)
    assert _flops(pairs["backward"]) == 2 * flops_per_batch(cfg, batch)
    for a, b in pairs["forward"] + pairs["backward"]:
        assert a.dtype == b.dtype == torch.bfloat16 and (a @ b).shape[-1] == b.shape[-1]


def test_the_floor_adds_up_and_leaves_the_model_without_gradients(tmp_path):
    s = BenchSettings(runtime=Runtime(), config="tiny", data="synthetic", seq_len=16, batch_size=4, steps=2, warmup=1)
    cfg = BertConfig(**{**tiny_config().to_dict(), "vocab_size": 30522})
    c = Candidate(s, BertTokenizer(write_vocab(tmp_path / "vocab.txt")), cfg, "plain")
    f = step_floor(c, cfg, "none", warmup=1)
    assert min(f["forward_ms"], f["backward_ms"], f["optimizer_ms"]) > 0
    assert f["ms_per_step"] == pytest.approx(f["forward_ms"] + f["backward_ms"] + f["optimizer_ms"])
    assert all(p.grad is None for p in c.params)
