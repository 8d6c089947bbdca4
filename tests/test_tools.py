"""tools/weight_drift.py: the relative change of each kind of encoder tensor against the pretrained weights."""
import sys

import pytest
import torch

from bert import BertModel
from conftest import ROOT
from utils import MinbertError

sys.path.insert(0, str(ROOT / "tools"))
import weight_drift  # noqa: E402


def test_weight_drift_measures_each_kind_of_tensor(tmp_path, tiny_model, capsys):
    start = BertModel.from_pretrained(str(tiny_model)).state_dict()
    moved = {f"bert.{n}": v * 1.1 if "layer_norm" in n and n.endswith("weight") else v.clone() for n, v in start.items()}
    moved["bert.bert_layers.0.self_attention.query.weight"] *= 1.5
    moved["heads.new.weight"] = torch.ones(2, 2)  # not the pretrained model's: left out
    torch.save({"model": moved}, tmp_path / "ck.pt")
    rows = weight_drift.main([str(tmp_path / "ck.pt"), "--pretrained", str(tiny_model)])
    got = rows[str(tmp_path / "ck.pt")]
    assert got["LayerNorm gains"] == pytest.approx(0.1, rel=1e-5) and got["LayerNorm biases"] == 0
    assert got["embedding tables"] == 0 and got["linear biases"] == 0
    by_kind = weight_drift.drift(moved, start)
    assert sorted(by_kind["weight matrices"])[-1] == pytest.approx(0.5, rel=1e-5)  # the one query matrix moved
    assert "LayerNorm gains" in capsys.readouterr().out
    torch.save({"model": {"other.weight": torch.ones(2)}}, tmp_path / "other.pt")
    with pytest.raises(MinbertError, match="none of its tensors is one of"):
        weight_drift.main([str(tmp_path / "other.pt"), "--pretrained", str(tiny_model)])


def test_layernorm_rate_puts_the_gains_alone_at_their_factor(tiny_model):
    import layernorm_rate
    import schedule
    from checkpoint import ModelSpec
    from multitask import MultitaskBERT
    model = MultitaskBERT(ModelSpec(pretrained=str(tiny_model), dropout=[0.1] * 3))
    groups = layernorm_rate.with_layernorm_factor(schedule.param_groups, 10.0)(model, 1e-4, llrd=0.5)
    rate = {id(p): g["lr"] for g in groups for p in g["params"]}
    plain = {id(p): g["lr"] for g in schedule.param_groups(model, 1e-4, llrd=0.5) for p in g["params"]}
    assert rate.keys() == plain.keys() and sum(len(g["params"]) for g in groups) == len(rate)
    for name, p in model.named_parameters():
        gain = "layer_norm" in name and name.endswith(".weight")
        assert rate[id(p)] == pytest.approx(plain[id(p)] * (10.0 if gain else 1.0)), name
