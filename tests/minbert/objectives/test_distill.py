"""distill.py and losses.DistillationLoss: the soft targets are the members' outputs averaged at temperature T, the
loss is Hinton et al.'s by hand, ensemble.py --soft_targets writes them, and a student trains on them."""
import json

import numpy as np
import pytest
import torch

import ensemble
import multitask_classifier as mt
from minbert.objectives.distill import (DistillationLoss, fold_of, held_out_weights, outside_fold,
                                        save_soft_targets, teacher_targets)
from tests.course import part2_args
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


def test_the_folds_split_every_training_set_alike_and_each_example_is_held_out_once():
    ids = [f"id{n}" for n in range(300)]
    folds = [fold_of(i, 3) for i in ids]
    assert folds == [fold_of(i, 3) for i in ids] and set(folds) == {1, 2, 3}  # stable, and every fold has examples
    assert all(60 < folds.count(k) < 140 for k in (1, 2, 3))  # a hash spreads them (100 each on average)
    examples = [_Train(None) for _ in ids]
    for e, i in zip(examples, ids):
        e.id = i
    kept = [{e.id for e in examples if outside_fold((k, 3))(e)} for k in (1, 2, 3)]
    for i, k in zip(ids, folds):  # run k trains on all but fold k: each example is missing from exactly one run
        assert [i in s for s in kept] == [j != k for j in (1, 2, 3)]
    assert outside_fold(None) is None


def test_cross_fitted_targets_come_from_the_members_that_did_not_see_the_example(tmp_path):
    ids = [f"id{n}" for n in range(12)]
    held_out = np.array([fold_of(i, 2) for i in ids])  # member 1 trained without fold 1, member 2 without fold 2
    sts = [np.full(12, 1.0), np.full(12, 4.0)]
    quora = [np.full(12, -3.0), np.full(12, 3.0)]
    sst = [np.zeros((12, 5)), np.eye(5)[np.arange(12) % 5] * 4]
    path = save_soft_targets(tmp_path / "cf.npz", ["m1", "m2"], {"sst": (ids, sst), "quora": (ids, quora),
                                                                 "sts": (ids, sts)}, [(1, 2), (2, 2)])
    got = teacher_targets(path, {t: _Train(ids) for t in ("sst", "quora", "sts")}, temperature=2.0)
    torch.testing.assert_close(got["sts"], torch.tensor(np.where(held_out == 1, 1.0, 4.0), dtype=torch.float32))
    torch.testing.assert_close(got["quora"], torch.sigmoid(torch.tensor(np.where(held_out == 1, -1.5, 1.5))).float())
    from_m2 = torch.softmax(torch.tensor(sst[1]) / 2, -1)
    torch.testing.assert_close(got["sst"], torch.where(torch.tensor(held_out == 1)[:, None], torch.full((12, 5), 0.2,
                                                       dtype=torch.float64), from_m2).float())
    with pytest.raises(MinbertError, match="no member was trained with --fold 2/2"):
        held_out_weights([(1, 2), (1, 2)], ids)
    with pytest.raises(MinbertError, match="--fold of 2 and 3 folds"):
        held_out_weights([(1, 2), (2, 3)], ids)
    with pytest.raises(MinbertError, match="member 2 was trained on every training example"):
        held_out_weights([(1, 2), None], ids)
    assert held_out_weights([None, None], ids) is None
    # a file whose marks leave an example without a teacher that did not see it is refused, naming the example
    with np.load(path, allow_pickle=False) as z:
        fields = {k: z[k] for k in z.files}
    fields["sts_weights"][:, 3] = 0
    np.savez(tmp_path / "bad.npz", **fields)
    with pytest.raises(MinbertError, match="sts training id id3 has no teacher that did not train on it"):
        teacher_targets(tmp_path / "bad.npz", {t: _Train(ids) for t in ("sst", "quora", "sts")}, 2.0)


def test_fold_teachers_train_on_their_part_and_give_cross_fitted_targets(tmp_path, course_data, tiny_model,
                                                                         monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    members = []
    for fold in ("1/2", "2/2"):
        name = fold.replace("/", "of")
        mt.main(part2_args(tmp_path / name, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "2",
                           "--fold", fold))
        out = capsys.readouterr().out
        assert f"--fold {fold}: training without fold {fold[0]} of 2" in out
        sizes = {t: len([i for i in course_ids(course_data, t) if fold_of(i, 2) != int(fold[0])]) for t in ("sst", "quora", "sts")}
        assert f"train sizes {sizes}" in out  # the run trained on the examples outside its fold only
        members.append(str(tmp_path / name / "ck" / "mt.pt"))
    with pytest.raises(MinbertError, match="no member was trained with --fold 2/2"):  # refused before any member runs
        ensemble.main(members[:1] + ["--data_dir", str(course_data), "--run_name", "one", "--soft_targets"])
    ensemble.main(members + ["--data_dir", str(course_data), "--run_name", "cf", "--out", str(tmp_path / "ens"),
                             "--soft_targets"])
    assert "each example's from the members that did not train on it" in capsys.readouterr().out
    with np.load(tmp_path / "runs" / "cf" / "soft-targets.npz", allow_pickle=False) as z:
        expected = np.stack([[fold_of(i, 2) == k for i in z["sst_ids"]] for k in (1, 2)]).astype(np.float32)
        np.testing.assert_array_equal(z["sst_weights"], expected)
    ensemble.main(members + ["--data_dir", str(course_data), "--run_name", "in", "--out", str(tmp_path / "ens2"),
                             "--soft_targets", "--in_sample"])  # the ablation: every member on every example
    with np.load(tmp_path / "runs" / "in" / "soft-targets.npz", allow_pickle=False) as z:
        assert "sst_weights" not in z.files and z["sst_outputs"].shape == (2, 48, 5)
    with pytest.raises(MinbertError, match="--in_sample changes cross-fitted soft targets"):
        ensemble.main(members + ["--data_dir", str(course_data), "--in_sample"])
    with pytest.raises(MinbertError, match="argument --fold: 3/2: I/K needs K >= 2 and 1 <= I <= K"):
        mt.get_args(["--fold", "3/2"])
    with pytest.raises(MinbertError, match="argument --fold: 'half' is not I/K"):
        mt.get_args(["--fold", "half"])


def course_ids(data, task):
    from minbert.course_data import data_file, read_examples
    return [e.id for e in read_examples(data_file(data, task, "train"), task, "train", log=lambda *a: None)]
