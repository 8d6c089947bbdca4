"""sweep.py: trials run the pipeline scripts in their own processes; a sweep stopped by Ctrl-C or killed
outright continues where it stopped, evaluating each configuration once; the median pruner stops a trial
after the epoch it rejects; a trial whose flags cannot work together fails alone; bad input is one line."""
import json
from pathlib import Path

import pytest

import sweep
from tests.processes import stub_trials, sweep_base, sweep_trials
from utils import MinbertError


@pytest.mark.parametrize("argv, match", [
    (["--study", "../../x"], r"--study '../../x': names a folder under runs/sweeps/"),
    (["--seeds", "-1"], r"argument --seeds: -1 must be an integer from 0 to 4294967295"),
    (["--sampler", "grid", "--sampler_seed", "3"], r"--sampler_seed seeds TPE's suggestions, which --sampler grid"),
    (["--no_prune", "--prune_startup", "3"], r"--prune_startup tunes the median pruner, which --no_prune turns off"),
    (["--storage", "sqlite:///:memory:"], r"--storage sqlite:///:memory:: an in-memory SQLite database lives in one "
                                          r"process, but a study is shared"),
    (["--space", "no_bucket=1,2"], r"--space no_bucket=1,2: --no_bucket is a switch \(on or off\): sweep it as "
                                   r"no_bucket=yes,no"),
    (["--space", "hidden_dropout_prob=yes,no"], r"--space hidden_dropout_prob=yes,no: --hidden_dropout_prob takes "
                                                r"a value, and yes/no sweep switches only"),
])
def test_sweep_flags_are_checked_in_one_line(tmp_path, monkeypatch, course_data, tiny_model, argv, match):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MinbertError, match=match):
        sweep.main(["classifier", "--space", "lr=1e-3", *argv, "--", *sweep_base(course_data, tiny_model)])
    assert not (tmp_path.parent / "x").exists() and not list(tmp_path.glob("runs/sweeps/*/t*"))


def test_a_switch_is_swept_as_yes_and_no_and_a_nested_study_has_one_folder(tmp_path, monkeypatch, course_data,
                                                                            tiny_model, capsys):
    """--space no_bucket=yes,no: "yes" passes the switch, "no" leaves it out; --study a/b keeps its database and
    trials in runs/sweeps/a/ (b.db beside the folder b/). The trials run on the stub pipeline, which logs its argv."""
    monkeypatch.chdir(tmp_path)
    stub_trials(monkeypatch)
    result = sweep.main(["classifier", "--sampler", "grid", "--space", "no_bucket=yes,no", "--trials", "2", "--study",
                         "a/b", "--no_prune", "--", *sweep_base(course_data, tiny_model)])
    out = capsys.readouterr().out
    assert result["trials"] == 2
    assert "trial 0: --no_bucket (seeds" in out or "trial 1: --no_bucket (seeds" in out
    assert (tmp_path / "runs" / "sweeps" / "a" / "b.db").is_file() and (tmp_path / "runs" / "sweeps" / "a" / "b").is_dir()
    assert not (tmp_path / "runs" / "sweeps" / "a" / "a").exists()
    given = {}
    for t in sweep_trials(tmp_path, "a/b"):
        log = Path(t.user_attrs["folders"][0]) / "STUB-log.jsonl"
        given[t.params["no_bucket"]] = json.loads(log.read_text().splitlines()[0])["argv"]
    assert "--no_bucket" in given["yes"] and "--no_bucket" not in given["no"]
    assert given["no"][:len(sweep_base(course_data, tiny_model))] == sweep_base(course_data, tiny_model)


def test_a_trials_spread_is_its_seeds_sample_deviation_and_none_for_one_seed(tmp_path, monkeypatch, course_data,
                                                                            tiny_model, capsys):
    """Two seeds: the table's spread and trials.csv's std are the seeds' sample standard deviation, computed here
    from the scores the stub logged; one seed: no spread (n/a in the table, an empty cell), never 0."""
    import csv
    import statistics
    monkeypatch.chdir(tmp_path)
    stub_trials(monkeypatch)
    for study, seeds in (("two", ["1", "2"]), ("one", ["1"])):
        sweep.main(["classifier", "--sampler", "grid", "--space", "lr=1e-3", "--trials", "1", "--study", study,
                    "--seeds", *seeds, "--no_prune", "--", *sweep_base(course_data, tiny_model)])
        out = capsys.readouterr().out
        row = next(csv.DictReader(open(tmp_path / "runs" / "sweeps" / study / "trials.csv")))
        scores = [json.loads((Path(f) / "STUB-log.jsonl").read_text().splitlines()[-1])["dev_score"]
                  for f in sweep_trials(tmp_path, study)[0].user_attrs["folders"]]
        ranked = next(line for line in out.splitlines() if line.startswith("1 "))
        if len(seeds) == 2:
            assert row["std"] == f"{statistics.stdev(scores):.4f}" and f" {statistics.stdev(scores):.4f} " in ranked
        else:
            assert row["std"] == "" and " n/a " in ranked
