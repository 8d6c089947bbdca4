"""tools/: weight_drift.py (the relative change of each kind of encoder tensor against the pretrained weights),
layernorm_rate.py, and soft_targets.py (how far an ensemble's soft targets agree with the gold labels)."""
import re
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


def test_soft_targets_compares_the_targets_with_the_gold_labels(tmp_path, course_data, capsys):
    import soft_targets
    from datasets import data_file, read_examples
    from distill import save_soft_targets
    ex = {t: read_examples(data_file(course_data, t, "train"), t, "train") for t in ("sst", "quora", "sts")}
    sst_gold = torch.tensor([e.label for e in ex["sst"]])
    # member 1 puts 10 on the gold class, member 2 on the class above it: at T = 1 the averaged target's p(gold)
    # is (softmax(10)[gold] + softmax with gold at 0) / 2, and its argmax the gold class only where member 1 wins
    one, two = torch.zeros(len(sst_gold), 5), torch.zeros(len(sst_gold), 5)
    one[torch.arange(len(sst_gold)), sst_gold] = 10.0
    two[torch.arange(len(sst_gold)), (sst_gold + 1) % 5] = 10.0
    quora_gold = torch.tensor([float(e.label) for e in ex["quora"]])
    wrong_half = torch.arange(len(quora_gold)) % 2 == 0  # every other pair predicted the wrong way round
    quora_logit = torch.where((quora_gold > 0.5) ^ wrong_half, 4.0, -4.0)
    sts_gold = torch.tensor([e.label for e in ex["sts"]], dtype=torch.float)
    save_soft_targets(tmp_path / "soft.npz", ["a", "b"], {
        "sst": ([e.id for e in ex["sst"]], [one.numpy(), two.numpy()]),
        "quora": ([e.id for e in ex["quora"]], [quora_logit.numpy()] * 2),
        "sts": ([e.id for e in ex["sts"]], [(2 * sts_gold + 1).numpy(), (2 * sts_gold + 1).numpy()])})
    soft_targets.main([str(tmp_path / "soft.npz"), "--data_dir", str(course_data), "--distill_temperature", "1"])
    out = capsys.readouterr().out.splitlines()
    peak = torch.softmax(torch.tensor([10.0, 0, 0, 0, 0]), 0)
    assert f"p(gold) {(peak[0] + peak[1]).item() / 2:.3f}" in out[0]  # both members' share of the gold class
    right = (~wrong_half).double().mean().item()
    p_gold = right * torch.sigmoid(torch.tensor(4.0)).item() + (1 - right) * torch.sigmoid(torch.tensor(-4.0)).item()
    assert f"argmax = gold {right:.3f}, p(gold) {p_gold:.3f}" in out[1]
    assert "Pearson r 1.000" in out[2]  # a linear map of the gold scores


def test_soft_targets_names_its_own_argument_when_the_file_is_bad(tmp_path, course_data):
    # The path is the tool's positional argument, not --distill: the one line must not name a flag not given.
    import soft_targets
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not an npz")
    with pytest.raises(MinbertError, match=rf"^{re.escape(str(bad))}: cannot read soft targets"):
        soft_targets.main([str(bad), "--data_dir", str(course_data)])
