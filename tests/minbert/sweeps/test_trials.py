"""sweeps/trials.py: a new study under an old name never writes into old trial folders; the pruner stops a trial
after the epoch it rejects."""
import csv
import textwrap

import pytest

import sweep
from minbert.sweeps import trials
from minbert.sweeps.trials import trial_folder


def test_a_new_study_under_an_old_name_never_writes_into_old_trial_folders(tmp_path):
    """Deleting a study's database and starting again numbers its trials from 0 again."""
    study = tmp_path / "runs" / "sweeps" / "s"
    (study / "t0-s1").mkdir(parents=True)
    (study / "t0-s1-2").mkdir()
    assert trial_folder(study, 0, 1) == study / "t0-s1-3"
    assert trial_folder(study, 1, 1) == study / "t1-s1"


FAKE_PIPELINE = textwrap.dedent('''
    import json, sys, time
    from pathlib import Path
    a = sys.argv
    folder = Path(a[a.index("--run_dir") + 1])
    trial = int(folder.name.split("-")[0][1:])  # runs/sweeps/STUDY/tN-sSEED: the third trial does badly
    scripted = [[0.8, 0.85, 0.9], [0.8, 0.86, 0.9], [0.2, 0.3, 0.4]][trial]
    folder.mkdir(parents=True)
    for epoch, score in enumerate(scripted):
        with open(folder / "fake-log.jsonl", "a") as fp:
            fp.write(json.dumps({"epoch": epoch, "dev_score": score}) + "\\n")
        if trial == 2:  # waits for the pruner, however busy the machine: only a pruned trial ends before 300 s
            time.sleep(300)
''')


def test_a_pruned_trial_stops_after_the_epoch_the_pruner_rejects(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    fake = tmp_path / "fake.py"
    fake.write_text(FAKE_PIPELINE)
    monkeypatch.setitem(trials.PIPELINES, "classifier", fake)
    result = sweep.main(["classifier", "--trials", "3", "--space", "lr=1e-4,2e-4,3e-4", "--sampler", "grid",
                         "--prune_startup", "2", "--study", "p", "--", "--datasets", "sst"])
    out = capsys.readouterr().out
    assert "trial 2: pruned after epoch 0" in out
    log = (tmp_path / "runs" / "sweeps" / "p" / "t2-s11711" / "fake-log.jsonl").read_text().splitlines()
    assert len(log) == 1  # its process was stopped after the first epoch
    assert result["trials"] == 2 and result["best_value"] == pytest.approx(0.9)
    rows = list(csv.DictReader(open(tmp_path / "runs" / "sweeps" / "p" / "trials.csv")))
    assert sorted(r["state"] for r in rows) == ["complete", "complete", "pruned"]
