"""tools/weight_drift.py: the relative change of each kind of encoder tensor against the pretrained weights."""
import pytest
import torch

from bert import BertModel
from tools import weight_drift
from utils import MinbertError


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
    torch.save({"model": {"classifier.weight": torch.ones(2)}, "spec": {"fine_tune_mode": "last-linear-layer"}},
               tmp_path / "head.pt")  # what a last-linear-layer run keeps
    with pytest.raises(MinbertError, match="head.pt: holds no encoder tensor: its run trained the head alone"):
        weight_drift.main([str(tmp_path / "head.pt"), "--pretrained", str(tiny_model)])
    torch.save({"model": moved, "spec": {"pretrained": "all-minilm-l6-v2", "fine_tune_mode": "full-model"}},
               tmp_path / "minilm.pt")  # a run from other weights: its drift from these would mean nothing
    with pytest.raises(MinbertError, match=r"minilm.pt: its run started from all-minilm-l6-v2, not from "
                                           r"--pretrained .*: give --pretrained all-minilm-l6-v2"):
        weight_drift.main([str(tmp_path / "minilm.pt"), "--pretrained", str(tiny_model)])
    torch.save({"model": moved, "spec": {"pretrained": str(tiny_model) + "/", "fine_tune_mode": "full-model"}},
               tmp_path / "same.pt")  # the same folder, written another way
    assert weight_drift.main([str(tmp_path / "same.pt"), "--pretrained", str(tiny_model)])
    with pytest.raises(MinbertError, match=r"a folder; give the checkpoint in it \(a .pt file its run wrote\)"):
        weight_drift.main([str(tmp_path / "same.pt"), str(tmp_path), "--pretrained", str(tiny_model)])
    assert "median relative change" not in capsys.readouterr().out.split("same.pt")[-1]  # no table begun


def test_a_bad_checkpoint_after_a_good_one_is_the_only_line(tmp_path, tiny_model, capsys):
    """Every checkpoint is read and checked before the table starts: no header and half a table above the error."""
    start = BertModel.from_pretrained(str(tiny_model)).state_dict()
    torch.save({"model": {f"bert.{n}": v.clone() for n, v in start.items()}}, tmp_path / "good.pt")
    torch.save({"model": {"other.weight": torch.ones(2)}}, tmp_path / "bad.pt")
    with pytest.raises(MinbertError, match="bad.pt: none of its tensors is one of"):
        weight_drift.main([str(tmp_path / "good.pt"), str(tmp_path / "bad.pt"), "--pretrained", str(tiny_model)])
    assert capsys.readouterr().out == ""
    with pytest.raises(MinbertError, match="good.pt: given twice; each checkpoint is a row once"):
        weight_drift.main([str(tmp_path / "good.pt"), str(tmp_path / "good.pt"), "--pretrained", str(tiny_model)])
    # a Build GPT-2 run's checkpoint: said so first (it had been told to give its start, which no BERT run takes)
    torch.save({"model": {"gpt.w": torch.ones(2)}, "pipeline": "gpt2-sonnet", "spec": {"pretrained": "tg"}},
               tmp_path / "gpt.pt")
    with pytest.raises(MinbertError, match=r"gpt.pt: a Build GPT-2 run's checkpoint \(gpt2-sonnet\); this tool "):
        weight_drift.main([str(tmp_path / "gpt.pt"), "--pretrained", str(tiny_model)])
