"""pipelines/ensemble.py: an ensemble of two copies is the model; members are checked before any runs; the
average is of probabilities; members of other data are refused."""
import json
import shutil

import numpy as np
import pytest

import classifier
import ensemble
import multitask_classifier as mt
from minbert.pipelines import ensemble as ensembling
from tests.helpers import output_files, part1_args, part2_args
from utils import MinbertError


@pytest.fixture
def trained(tmp_path, course_data, tiny_model):
    """One trained multitask checkpoint and its six files."""
    mt.main(part2_args(tmp_path, course_data, tiny_model, "--epochs", "1"))
    return tmp_path / "ck" / "mt.pt", tmp_path / "pred"


def test_ensemble_of_two_copies_reproduces_the_model(tmp_path, course_data, trained, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ckpt, pred = trained
    copy = tmp_path / "copy.pt"
    shutil.copyfile(ckpt, copy)
    scores = ensemble.main([str(ckpt), str(copy), "--data_dir", str(course_data), "--out", str(tmp_path / "ens")])
    assert output_files(tmp_path / "ens") == output_files(pred)
    out = capsys.readouterr().out
    assert "six files in runs/ensemble-" in out and f"predictions copied to {tmp_path / 'ens'}" in out
    # folders of prediction files: a vote of two copies is the copy; published over the first ensemble's
    # files, which the line names (they stay in the first ensemble's run folder)
    folder = tmp_path / "copy"
    shutil.copytree(pred, folder)
    again = ensemble.main([str(pred), str(folder), "--data_dir", str(course_data), "--out", str(tmp_path / "ens"),
                           "--run_name", "vote"])
    assert output_files(tmp_path / "runs" / "vote") == output_files(pred)
    assert again == pytest.approx(scores, abs=1e-3)  # files hold STS to 4 decimals
    sources = json.loads((tmp_path / "ens" / ".sources.json").read_text())
    assert {v["run"] for v in sources.values()} == {"vote"}


def test_ensemble_refuses_a_member_twice_and_a_bad_one_before_running_any(tmp_path, course_data, trained, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ckpt, pred = trained
    with pytest.raises(MinbertError, match="the same member as"):
        ensemble.main([str(pred), str(pred) + "/", "--data_dir", str(course_data)])
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    monkeypatch.setattr(ensembling, "checkpoint_member", lambda *a: pytest.fail("a member ran before all were checked"))
    with pytest.raises(MinbertError, match="junk.pt: cannot read checkpoint"):
        ensemble.main([str(ckpt), str(tmp_path / "junk.pt"), "--data_dir", str(course_data)])
    assert not (tmp_path / "runs").exists() and not (tmp_path / "predictions").exists()


def test_ensemble_averages_probabilities(tmp_path):
    a, b = np.array([[2.0, 0, 0, 0, 0]]), np.array([[0.0, 3, 0, 0, 0]])
    mean = (ensembling.as_probabilities("sst", a) + ensembling.as_probabilities("sst", b)) / 2
    assert ensembling.decide("sst", mean)[0] == 1  # class 1 wins on probability, though logits 2 vs 3 tie per-model
    q = (ensembling.as_probabilities("quora", np.array([4.0])) + ensembling.as_probabilities("quora", np.array([-1.0]))) / 2
    assert ensembling.decide("quora", q)[0] == 1


def test_ensemble_refuses_mismatched_members(tmp_path, course_data, trained, tiny_model):
    ckpt, pred = trained
    bad = tmp_path / "bad"
    shutil.copytree(pred, bad)
    lines = (bad / "sts-dev-output.csv").read_text().splitlines()
    (bad / "sts-dev-output.csv").write_text("\n".join(lines[:1] + ["deadbeef , 3.0"] + lines[2:]) + "\n")
    with pytest.raises(MinbertError, match=r"sts-dev-output.csv: its ids are not those of sts dev: id deadbeef"):
        ensemble.main([str(ckpt), str(bad), "--data_dir", str(course_data), "--out", str(tmp_path / "e")])
    classifier.main(part1_args(tmp_path / "cls", course_data, tiny_model, "--epochs", "1", "--datasets", "cfimdb"))
    with pytest.raises(MinbertError, match="not a multitask_classifier.py checkpoint \\(it was written by classifier.py\\)"):
        ensemble.main([str(ckpt), str(tmp_path / "cls" / "ck" / "last-linear-layer-cfimdb.pt"), "--data_dir",
                       str(course_data), "--out", str(tmp_path / "e")])
    assert not (tmp_path / "e").exists()  # refused before anything was written
