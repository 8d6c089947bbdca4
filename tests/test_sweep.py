"""sweep.py: trials run the pipelines in-process, a killed sweep resumes without re-running finished trials,
the median pruner stops a trial after the epoch it rejects, and bad input is one line before training."""
import csv

import pytest

import classifier
import sweep
from utils import MinbertError


def _base(course_data, tiny_model, epochs=1):
    return ["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--datasets", "sst",
            "--fine-tune-mode", "full-model", "--batch_size", "8", "--epochs", str(epochs)]


def test_killed_sweep_resumes_without_rerunning_finished_trials(tmp_path, course_data, tiny_model, monkeypatch,
                                                                 capsys):
    monkeypatch.chdir(tmp_path)
    real, calls = classifier.main, []

    def counted(argv, on_epoch=None):
        calls.append(argv[argv.index("--run_name") + 1])
        if len(calls) == 5:  # the machine goes away during the third trial's first seed
            raise KeyboardInterrupt
        return real(argv, on_epoch=on_epoch)
    monkeypatch.setattr(classifier, "main", counted)
    argv = ["classifier", "--trials", "3", "--space", "lr=log:1e-4:1e-2", "hidden_dropout_prob=0.0,0.2",
            "--seeds", "1", "2", "--study", "s", "--", *_base(course_data, tiny_model)]
    with pytest.raises(KeyboardInterrupt):
        sweep.main(argv)
    assert calls == ["s-t0-s1", "s-t0-s2", "s-t1-s1", "s-t1-s2", "s-t2-s1"]
    calls.clear()
    result = sweep.main(argv)
    out = capsys.readouterr().out
    assert "2 trial(s) finished before, 1 to run" in out
    assert calls == ["s-t3-s1", "s-t3-s2"]  # only the missing trial ran; the killed one (t2) is marked failed
    assert result["trials"] == 3
    rows = list(csv.DictReader(open(tmp_path / "runs" / "sweeps" / "s" / "trials.csv")))
    assert [r["trial"] for r in rows] == ["0", "1", "3"] and all(r["state"] == "complete" for r in rows)
    for r in rows:
        scores = [float(x) for x in r["scores"].split()]
        assert float(r["mean"]) == pytest.approx(sum(scores) / 2, abs=1e-4)
    lines = out.splitlines()
    ranks = [l for l in lines if l[:1].isdigit()]
    means = [float(l.split()[2]) for l in ranks]
    assert means == sorted(means, reverse=True)
    assert any(l.startswith("winning command: python classifier.py") and "--lr" in l for l in lines)
    assert not (tmp_path / "predictions").exists()  # trials never touch the user's predictions/


def test_a_pruned_trial_stops_after_the_epoch_the_pruner_rejects(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    scripted = iter([[0.8, 0.85, 0.9], [0.8, 0.86, 0.9], [0.2, 0.3, 0.4]])
    epochs_run = []

    def fake_main(argv, on_epoch=None):
        seen = []
        for epoch, score in enumerate(next(scripted)):
            seen.append(epoch)
            try:
                on_epoch(epoch, score)
            finally:
                epochs_run.append(list(seen))
        return [{"dev_acc": score}]
    monkeypatch.setattr(classifier, "main", fake_main)
    monkeypatch.setattr(classifier, "get_args", lambda argv: None)  # flags are not the point here
    result = sweep.main(["classifier", "--trials", "3", "--space", "lr=1e-4,2e-4,3e-4", "--sampler", "grid",
                         "--prune_startup", "2", "--study", "p", "--", "--datasets", "sst"])
    out = capsys.readouterr().out
    assert "trial 2: pruned after epoch 0" in out
    assert epochs_run[-1] == [0]  # the third trial ran one epoch, then stopped
    assert result["trials"] == 2
    rows = list(csv.DictReader(open(tmp_path / "runs" / "sweeps" / "p" / "trials.csv")))
    assert [r["state"] for r in rows] == ["complete", "complete", "pruned"]


@pytest.mark.parametrize("argv, match", [
    (["--space", "lr"], r"--space 'lr': expected FLAG=SPEC"),
    (["--space", "lr=log:1e-3"], r"log needs LO:HI"),
    (["--space", "lr=log:1e-3:1e-4"], r"need LO < HI"),
    (["--space", "lr=log:0:1e-4"], r"LO > 0"),
    (["--space", "lernrate=1e-3,1e-4"], r"unrecognized arguments: --lernrate"),
    (["--space", "lr=-1,1e-4"], r"argument --lr: -1 must be a number > 0"),
    (["--space", "lr=log:1e-5:1e-3", "--sampler", "grid"], r"--sampler grid takes comma lists only"),
])
def test_bad_space_is_one_line_before_anything_trains(tmp_path, monkeypatch, course_data, tiny_model, argv, match):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(classifier, "main", lambda *a, **k: pytest.fail("trained despite a bad space"))
    with pytest.raises(MinbertError, match=match):
        sweep.main(["classifier", *argv, "--", *_base(course_data, tiny_model)])


def test_unknown_trial_flag_and_missing_dataset(tmp_path, monkeypatch, course_data, tiny_model):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MinbertError, match="unrecognized arguments: --bogus"):
        sweep.main(["classifier", "--space", "lr=1e-3,1e-4", "--", *_base(course_data, tiny_model), "--bogus"])
    with pytest.raises(MinbertError, match="a classifier sweep scores one dataset"):
        sweep.main(["classifier", "--space", "lr=1e-3,1e-4", "--", "--epochs", "1"])
