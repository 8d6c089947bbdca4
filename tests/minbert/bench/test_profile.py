"""bench/profile.py: a profiled step's time by phase and by kind of operator, every operator in one kind."""
from config import BertConfig
from minbert.bench.candidate import Candidate
from minbert.bench.profile import CATEGORIES, category, profile_steps
from minbert.specs import BenchSettings, Runtime
from tests.checkpoints import tiny_config, write_vocab
from tokenizer import BertTokenizer


def test_the_kinds_name_the_operators_they_mean():
    assert category("aten::gelu") == "softmax, layer norm, GELU" and category("aten::ge") == "dropout masks"
    assert category("aten::_foreach_sqrt") == "optimizer arithmetic" and category("aten::mm") == "matmuls"
    assert category("aten::something_new") == "other"
    assert len({label for label, _ in CATEGORIES}) == len(CATEGORIES)


def test_a_profiled_step_is_split_by_phase_and_kind(tmp_path):
    s = BenchSettings(runtime=Runtime(), config="tiny", data="synthetic", seq_len=16, batch_size=4, steps=2, warmup=1)
    cfg = BertConfig(**{**tiny_config().to_dict(), "vocab_size": 30522})
    c = Candidate(s, BertTokenizer(write_vocab(tmp_path / "vocab.txt")), cfg, "plain")
    p = profile_steps(c, steps=2, warmup=1)
    assert set(p["phases"]) == {"forward", "backward", "optimizer"}
    assert p["categories"]["matmuls"] > 0 and p["categories"]["optimizer arithmetic"] > 0
    assert abs(sum(p["categories"].values()) - p["ms_per_step"]) < 1e-6
