"""distill.py and losses.DistillationLoss: the soft targets are the members' outputs averaged at temperature T, the
loss is Hinton et al.'s by hand, ensemble.py --soft_targets writes them, and a student trains on them."""
import json

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import ensemble
import multitask_classifier as mt
from conftest import part2_args
from distill import save_soft_targets, teacher_targets
from losses import DistillationLoss
from utils import MinbertError


def test_the_loss_is_hintons_by_hand():
    T = 2.0
    z = torch.tensor([[1.0, 0.0, -1.0, 0.5, 0.0]])
    p = torch.tensor([[0.1, 0.2, 0.3, 0.2, 0.2]])
    q = torch.softmax(z / T, -1)
    by_hand = T * T * float((p * (p.log() - q.log())).sum())  # T^2 KL(p || q)
    assert DistillationLoss(T)("sst", z, p).item() == pytest.approx(by_hand, rel=1e-5)
    logit, target = torch.tensor([0.8, -1.2]), torch.tensor([0.7, 0.4])
    s = torch.sigmoid(logit / T)
    bce = -(target * s.log() + (1 - target) * (1 - s).log()).mean()
    assert DistillationLoss(T)("quora", logit, target).item() == pytest.approx(T * T * bce.item(), rel=1e-5)
    assert DistillationLoss(T)("sts", torch.tensor([1.0, 4.0]), torch.tensor([2.0, 4.5])).item() == pytest.approx(0.625)
    # the mechanism: with the teacher alone (alpha 1), the gradient on the student's logits is T (q - p) / batch
    z = z.clone().requires_grad_()
    DistillationLoss(T)("sst", z, p).backward()
    torch.testing.assert_close(z.grad, T * (q - p))


class _Train:
    def __init__(self, ids):
        self.ids = ids


def test_targets_average_the_members_at_the_temperature_and_follow_the_students_order(tmp_path):
    ids = ["a", "b", "c"]
    sst = [np.random.default_rng(i).normal(size=(3, 5)) for i in range(2)]
    quora = [np.array([0.0, 2.0, -2.0]), np.array([1.0, 1.0, 1.0])]
    sts = [np.array([1.0, 2.0, 3.0]), np.array([3.0, 2.0, 1.0])]
    path = save_soft_targets(tmp_path / "soft.npz", ["m1", "m2"], {"sst": (ids, sst), "quora": (ids, quora),
                                                                   "sts": (ids, sts)})
    train = {t: _Train(["c", "a", "b"]) for t in ("sst", "quora", "sts")}  # another order than the teacher's file
    got = teacher_targets(path, train, temperature=2.0)
    order = [2, 0, 1]
    expected = (torch.softmax(torch.tensor(sst[0][order]) / 2, -1) + torch.softmax(torch.tensor(sst[1][order]) / 2, -1)) / 2
    torch.testing.assert_close(got["sst"], expected.float())
    torch.testing.assert_close(got["quora"], ((torch.sigmoid(torch.tensor(quora[0][order]) / 2)
                                               + torch.sigmoid(torch.tensor(quora[1][order]) / 2)) / 2).float())
    torch.testing.assert_close(got["sts"], torch.tensor([2.0, 2.0, 2.0]))
    with pytest.raises(MinbertError, match="no teacher prediction for sst training id z .*other training data"):
        teacher_targets(path, {**train, "sst": _Train(["a", "z"])}, 2.0)
    with pytest.raises(MinbertError, match="--distill .*absent.npz: file not found"):
        teacher_targets(tmp_path / "absent.npz", train, 2.0)


def test_an_ensemble_writes_soft_targets_and_a_student_trains_on_them(tmp_path, course_data, tiny_model, monkeypatch,
                                                                     capsys):
    monkeypatch.chdir(tmp_path)
    members = []
    for seed in ("1", "2"):
        mt.main(part2_args(tmp_path / seed, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "3",
                           "--seed", seed))
        members.append(str(tmp_path / seed / "ck" / "mt.pt"))
    ensemble.main(members + ["--data_dir", str(course_data), "--run_name", "teach", "--out", str(tmp_path / "ens"),
                             "--soft_targets"])
    soft = tmp_path / "runs" / "teach" / "soft-targets.npz"
    assert "multitask_classifier.py --distill runs/teach/soft-targets.npz" in capsys.readouterr().out
    with np.load(soft, allow_pickle=False) as z:
        assert z["sst_outputs"].shape == (2, 48, 5) and z["quora_outputs"].shape == (2, 48)
    mt.main(part2_args(tmp_path / "student", course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "3",
                       "--distill", str(soft), "--distill_weight", "0.7"))
    log = json.loads((tmp_path / "student" / "ck" / "mt-log.jsonl").read_text().splitlines()[0])
    assert log["loss_terms"]["distill"] > 0
    with pytest.raises(MinbertError, match="--soft_targets: member .* is a folder of predictions"):
        ensemble.main([members[0], str(tmp_path / "1" / "pred"), "--data_dir", str(course_data), "--soft_targets"])


def test_distillation_settings_act_only_with_distill():
    with pytest.raises(MinbertError, match="--distill_weight shapes the distillation loss, which is off"):
        mt.get_args(["--distill_weight", "0.3"])
