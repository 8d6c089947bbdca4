"""tools/layernorm_rate.py: BERT's LayerNorm gains in a group of their own at their factor; a factor that is no
learning-rate factor is one line."""
import runpy
import sys

import pytest

from tests.course import ROOT
from tools import layernorm_rate


def test_layernorm_rate_puts_the_gains_alone_at_their_factor(tiny_model):
    from minbert.training import schedule
    from minbert.specs import ModelSpec
    from minbert.tasks.multitask import MultitaskBERT
    model = MultitaskBERT(ModelSpec(pretrained=str(tiny_model), dropout=[0.1] * 3))
    groups = layernorm_rate.with_layernorm_factor(schedule.param_groups, 10.0)(model, 1e-4, llrd=0.5)
    rate = {id(p): g["lr"] for g in groups for p in g["params"]}
    plain = {id(p): g["lr"] for g in schedule.param_groups(model, 1e-4, llrd=0.5) for p in g["params"]}
    assert rate.keys() == plain.keys() and sum(len(g["params"]) for g in groups) == len(rate)
    for name, p in model.named_parameters():
        gain = "layer_norm" in name and name.endswith(".weight")
        assert rate[id(p)] == pytest.approx(plain[id(p)] * (10.0 if gain else 1.0)), name


@pytest.mark.parametrize("factor", ["-5", "0", "nan", "inf"])
def test_a_factor_no_learning_rate_can_take_is_one_line_before_any_run(factor, monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "argv", ["tools/layernorm_rate.py", factor, "--run_dir", str(tmp_path / "run")])
    with pytest.raises(SystemExit, match=f"error: FACTOR {factor}: a learning-rate factor must be a number > 0"):
        runpy.run_path(str(ROOT / "tools" / "layernorm_rate.py"), run_name="__main__")
    assert not (tmp_path / "run").exists()
