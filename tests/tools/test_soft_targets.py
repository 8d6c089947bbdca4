"""tools/soft_targets.py: the targets against the gold labels, and a bad file named by the tool's own argument."""
import re

import pytest
import torch

from tools import soft_targets
from utils import MinbertError


def test_soft_targets_compares_the_targets_with_the_gold_labels(tmp_path, course_data, capsys):
    from minbert.course_data import data_file, read_examples
    from minbert.objectives.distill import save_soft_targets
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
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not an npz")
    with pytest.raises(MinbertError,
                       match=rf"^{re.escape(str(bad))}: cannot read soft targets: not a NumPy .npz archive"):
        soft_targets.main([str(bad), "--data_dir", str(course_data)])
