"""sweeps/storage.py: storage problems are one line; two workers share a study (SQLite, PostgreSQL); a study
continues only with its space, pipeline, flags and seeds; a killed worker's trial runs again."""
import os
import re
import signal

import pytest

import sweep
from tests.course import ROOT
from tests.processes import (held_first_trial, run_main, start_sweep, stop_during_trial, stub_trials, sweep_base,
                             sweep_trials)
from utils import MinbertError


def test_storage_problems_are_one_line(tmp_path, monkeypatch, course_data, tiny_model):
    monkeypatch.chdir(tmp_path)
    base = ["classifier", "--space", "lr=1e-3", "--"] + sweep_base(course_data, tiny_model)
    with pytest.raises(MinbertError, match=r"--storage sqlite:///.*minbert/sweep.db: among the project's code"):
        sweep.main(base[:3] + ["--storage", f"sqlite:///{ROOT / 'minbert' / 'sweep.db'}"] + base[3:])
    assert not (ROOT / "minbert" / "sweep.db").exists()
    junk = tmp_path / "junk.db"
    junk.write_text("not a database")
    with pytest.raises(MinbertError, match="is not an SQLite database"):
        sweep.main(base[:3] + ["--storage", f"sqlite:///{junk}"] + base[3:])
    import hashlib
    import sqlite3
    mine = tmp_path / "mine.db"  # the user's own database: Optuna would add its tables to it
    with sqlite3.connect(mine) as db:
        db.execute("CREATE TABLE notes (text)")
    before = hashlib.sha256(mine.read_bytes()).hexdigest()
    with pytest.raises(MinbertError, match=r"mine.db is an SQLite database of something else \(no Optuna study in it\)"):
        sweep.main(base[:3] + ["--storage", f"sqlite:///{mine}"] + base[3:])
    assert hashlib.sha256(mine.read_bytes()).hexdigest() == before
    import importlib.util
    if importlib.util.find_spec("psycopg") is None:
        with pytest.raises(MinbertError, match="driver psycopg is not installed"):
            sweep.main(base[:3] + ["--storage", "postgresql://u@127.0.0.1:1/db"] + base[3:])
    else:
        with pytest.raises(MinbertError, match="cannot open the study database"):
            sweep.main(base[:3] + ["--storage", "postgresql://u@127.0.0.1:1/db"] + base[3:])


def _two_workers(tmp_path, course_data, tiny_model, storage):
    """Two sweep processes on one study (trials on the stub pipeline): four grid points, each evaluated once. The
    first worker's trial is held (its process frozen) until the second worker has finished, so both take trials
    whatever the machine's load: the second must leave the held trial alone and run the other three."""
    argv = ["classifier", "--sampler", "grid", "--space", "lr=1e-3,2e-3,3e-3,4e-3", "--trials", "4", "--study", "w",
            "--no_prune", *(["--storage", storage] if storage else []), "--", *sweep_base(course_data, tiny_model)]
    first = start_sweep(tmp_path, argv, hold=0)
    held, _ = held_first_trial(first)
    try:
        second = start_sweep(tmp_path, argv)
        outs = {"second": second.communicate(timeout=600)}
    finally:
        os.kill(held, signal.SIGCONT)
    outs["first"] = first.communicate(timeout=600)
    for w, name in ((first, "first"), (second, "second")):
        assert w.returncode == 0 and "Traceback" not in outs[name][1], outs[name][1][-2000:]
    import optuna
    study = optuna.load_study(study_name="w", storage=storage or f"sqlite:///{tmp_path / 'runs' / 'sweeps' / 'w.db'}")
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert sorted(t.params["lr"] for t in complete) == ["1e-3", "2e-3", "3e-3", "4e-3"]
    assert not [t for t in study.trials if t.state.name == "FAIL"]
    by_worker = sorted(sum(t.user_attrs["worker"] == w for t in complete) for w in {t.user_attrs["worker"] for t in complete})
    assert by_worker == [1, 3]  # the held trial and the second worker's three


def test_two_workers_share_a_study_on_sqlite(tmp_path, course_data, tiny_model):
    _two_workers(tmp_path, course_data, tiny_model, None)


def test_two_workers_share_a_study_on_postgresql(tmp_path, course_data, tiny_model, postgres_url):
    _two_workers(tmp_path, course_data, tiny_model, postgres_url)


def _study_with_one_trial(tmp_path, name, distribution):
    """A study in the sweep's default storage holding one finished trial drawn from `distribution` (for lr)."""
    import optuna
    (tmp_path / "runs" / "sweeps").mkdir(parents=True, exist_ok=True)
    study = optuna.create_study(study_name=name, storage=f"sqlite:///{tmp_path / 'runs' / 'sweeps' / (name + '.db')}",
                                direction="maximize")
    trial = study.ask({"lr": distribution})
    study.tell(trial, 0.5)


@pytest.mark.parametrize("space, sampler", [("lr=1e-3,2e-3,3e-3", "grid"), ("lr=log:1e-4:1e-2", "tpe")])
def test_a_study_continued_with_another_space_is_one_line(tmp_path, monkeypatch, course_data, tiny_model, space, sampler):
    """A grid grown by one value, or a list turned into a range: Optuna cannot mix them; one line says which space
    the study has, before anything trains."""
    from optuna.distributions import CategoricalDistribution
    monkeypatch.chdir(tmp_path)
    _study_with_one_trial(tmp_path, "s", CategoricalDistribution(["1e-3", "2e-3"]))
    with pytest.raises(MinbertError, match=rf"study s: its trials searched --space lr=1e-3,2e-3, not {space}"):
        sweep.main(["classifier", "--space", space, "--sampler", sampler, "--study", "s", "--", *sweep_base(course_data, tiny_model)])
    assert not list((tmp_path / "runs" / "sweeps").glob("s/t*"))


def test_a_study_continued_with_another_pipeline_flags_or_seeds_is_one_line(tmp_path, monkeypatch, course_data,
                                                                           tiny_model):
    """Trials of another pipeline, other fixed flags or other seeds are not comparable with the study's: each is
    refused before anything trains, the study as it was."""
    stub_trials(monkeypatch)
    sweep_flags = ["classifier", "--sampler", "grid", "--space", "lr=1e-3,2e-3", "--trials", "1", "--study", "s", "--no_prune"]
    base = sweep_base(course_data, tiny_model)
    done = run_main("sweep.py", *sweep_flags, "--", *base, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    for flags, trial_flags, match in [
        (["multitask", *sweep_flags[1:]], [b for b in base if b not in ("--datasets", "sst")],
         r"study s: its trials ran classifier trials, not multitask"),
        (sweep_flags, [*base, "--max_length", "16"],
         r"study s: its trials ran with the flags after -- --pretrained .*--smart_weight 0, not --pretrained .*--max_length "
         r"16: the same to continue"),
        ([*sweep_flags, "--seeds", "1", "2"], base, r"study s: its trials ran --seeds 11711, not --seeds 1 2"),
    ]:
        again = run_main("sweep.py", *flags, "--", *trial_flags, cwd=tmp_path)
        assert again.returncode == 2 and re.search(match, again.stderr), again.stderr[-2000:]
        assert len(again.stderr.strip().splitlines()) == 1, again.stderr[-2000:]
    assert len(sweep_trials(tmp_path, "s")) == 1


def test_grid_point_of_a_killed_worker_runs_again(tmp_path, monkeypatch, course_data, tiny_model):
    argv = ["classifier", "--sampler", "grid", "--space", "lr=1e-3,3e-3", "--trials", "2", "--study", "g", "--no_prune", "--",
            *sweep_base(course_data, tiny_model, epochs=2)]
    # kill -9 of the sweep and its trial: no chance to clean up
    stop_during_trial(start_sweep(tmp_path, argv, hold=1), tmp_path / "runs" / "sweeps" / "g", 1, signal.SIGKILL)
    stub_trials(monkeypatch)
    done = run_main("sweep.py", *argv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "its worker (process" in done.stdout and "queued to run again" in done.stdout
    complete = [t for t in sweep_trials(tmp_path, "g") if t.state.name == "COMPLETE"]
    assert sorted(t.params["lr"] for t in complete) == ["1e-3", "3e-3"]


def test_a_ctrl_c_in_the_database_pool_is_not_logged_with_its_traceback(caplog):
    """SQLAlchemy logs an exception met while returning a connection with its traceback; a Ctrl-C there is the
    sweep's to report in one line. Other errors of the pool are still logged."""
    import logging
    import sys
    from minbert.sweeps import storage  # noqa: F401  (installs the filter)
    pool = logging.getLogger("sqlalchemy.pool")
    for error in (KeyboardInterrupt(), OSError("disk I/O error")):
        try:
            raise error
        except BaseException:
            pool.error("Exception during reset or similar", exc_info=sys.exc_info())
    assert [type(r.exc_info[1]).__name__ for r in caplog.records if r.name == "sqlalchemy.pool"] == ["OSError"]


def test_a_trial_a_ctrl_c_caught_in_its_set_up_is_failed_and_queued_not_left_running(tmp_path):
    """Optuna creates the trial before the objective names its worker: a Ctrl-C there had left it RUNNING for
    ever, counted as another worker's, and the study short of --trials. Another worker's named trial is left."""
    import optuna
    from minbert.sweeps.storage import WORKER, fail_unstarted, requeue_interrupted, running_elsewhere
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 's.db'}", study_name="s")
    other = study.ask()
    other.set_user_attr("worker", "elsewhere:1")
    ours = study.ask()  # stopped here: no params, no worker
    fail_unstarted(study, since=0)
    states = {t.number: (t.state.name, t.user_attrs.get("worker")) for t in study.get_trials()}
    assert states[other.number] == ("RUNNING", "elsewhere:1") and states[ours.number] == ("FAIL", WORKER)
    assert requeue_interrupted(study) == 1 and running_elsewhere(study) == 1
