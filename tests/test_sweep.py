"""sweep.py: trials run the pipeline scripts in their own processes; a sweep stopped by Ctrl-C or killed
outright continues where it stopped, evaluating each configuration once; the median pruner stops a trial
after the epoch it rejects; a trial whose flags cannot work together fails alone; bad input is one line."""
import csv
import json
import os
import re
import signal
import subprocess
import sys
import textwrap

import pytest

import sweep
from conftest import ROOT
from utils import MinbertError


def _base(course_data, tiny_model, epochs=1):
    return ["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--datasets", "sst",
            "--fine-tune-mode", "full-model", "--batch_size", "8", "--epochs", str(epochs), "--smart_weight", "0"]


def _trials(tmp_path, study):
    import optuna
    return optuna.load_study(study_name=study, storage=f"sqlite:///{tmp_path / 'runs' / 'sweeps' / (study + '.db')}").trials


def _ctrl_c_reaches_python():
    # A job that a non-interactive shell starts in the background (`pytest ... &` in a script, as CI or nohup
    # may) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler: the sweep would
    # never see the test's Ctrl-C. A user's terminal gives the default disposition, as this does.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(tmp_path, argv):
    return subprocess.Popen([sys.executable, str(ROOT / "sweep.py"), *argv], cwd=tmp_path, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, preexec_fn=_ctrl_c_reaches_python)


def _children(pid):
    """The pids of `pid`'s child processes (Linux: /proc/PID/task/*/children)."""
    from pathlib import Path
    return [int(c) for t in Path(f"/proc/{pid}/task").glob("*") for c in (t / "children").read_text().split()]


def _stop_during_trial(proc, study_folder, number, sig):
    """Send `sig` to the sweep while trial `number`'s process is provably mid-run; returns its output.

    Nothing here waits on a clock: the trial's first epoch line in its log says it is training, and the
    trial's process is then frozen (SIGSTOP) so that it cannot finish before the signal lands, however
    busy the machine. It is let go (SIGCONT) once the signal is sent."""
    import time
    out = []
    for line in proc.stdout:
        out.append(line)
        if line.startswith(f"trial {number}: --"):
            break
    logged = lambda: [p for p in study_folder.glob(f"t{number}-s*/*-log.jsonl") if p.read_text().strip()]  # noqa: E731
    while not logged():
        assert proc.poll() is None, "the sweep ended before trial %d logged an epoch" % number
        time.sleep(0.02)
    trial = _children(proc.pid)
    assert len(trial) == 1, f"expected the trial's one process under the sweep, found {trial}"
    os.kill(trial[0], signal.SIGSTOP)
    try:
        os.killpg(proc.pid, sig) if sig == signal.SIGKILL else proc.send_signal(sig)
    finally:
        try:
            os.kill(trial[0], signal.SIGCONT)
        except ProcessLookupError:
            pass
    rest, err = proc.communicate(timeout=600)
    return "".join(out) + rest, err


def test_ctrl_c_then_rerun_evaluates_each_configuration_once(tmp_path, course_data, tiny_model):
    # two epochs: the trial is stopped after its first, with the second still to run
    argv = ["classifier", "--trials", "3", "--space", "lr=log:1e-4:1e-2", "--study", "s", "--no_prune", "--",
            *_base(course_data, tiny_model, epochs=2)]
    out, err = _stop_during_trial(_start(tmp_path, argv), tmp_path / "runs" / "sweeps" / "s", 2, signal.SIGINT)
    assert "Traceback" not in err
    line = [l for l in err.splitlines() if l.startswith("interrupted:")]
    assert line and "continue the sweep with: python sweep.py classifier --trials 3" in line[0], (out[-3000:], err[-3000:])
    done = subprocess.run([sys.executable, str(ROOT / "sweep.py"), *argv], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    trials = _trials(tmp_path, "s")
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    assert len(complete) == 3 and len({t.params["lr"] for t in complete}) == 3  # no configuration twice
    interrupted = [t for t in trials if t.state.name == "FAIL" and t.user_attrs.get("interrupted")]
    assert len(interrupted) == 1 and interrupted[0].params in [t.params for t in complete]  # it ran again
    assert "winning command: python classifier.py" in done.stdout
    assert not (tmp_path / "predictions").exists()  # trials never touch the user's predictions/


def test_grid_point_of_a_killed_worker_runs_again(tmp_path, course_data, tiny_model):
    argv = ["classifier", "--sampler", "grid", "--space", "lr=1e-3,3e-3", "--trials", "2", "--study", "g", "--no_prune", "--",
            *_base(course_data, tiny_model, epochs=2)]
    # kill -9 of the sweep and its trial: no chance to clean up
    _stop_during_trial(_start(tmp_path, argv), tmp_path / "runs" / "sweeps" / "g", 1, signal.SIGKILL)
    done = subprocess.run([sys.executable, str(ROOT / "sweep.py"), *argv], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "its worker (process" in done.stdout and "queued to run again" in done.stdout
    complete = [t for t in _trials(tmp_path, "g") if t.state.name == "COMPLETE"]
    assert sorted(t.params["lr"] for t in complete) == ["1e-3", "3e-3"]


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
    monkeypatch.setitem(sweep.PIPELINES, "classifier", fake)
    result = sweep.main(["classifier", "--trials", "3", "--space", "lr=1e-4,2e-4,3e-4", "--sampler", "grid",
                         "--prune_startup", "2", "--study", "p", "--", "--datasets", "sst"])
    out = capsys.readouterr().out
    assert "trial 2: pruned after epoch 0" in out
    log = (tmp_path / "runs" / "sweeps" / "p" / "t2-s11711" / "fake-log.jsonl").read_text().splitlines()
    assert len(log) == 1  # its process was stopped after the first epoch
    assert result["trials"] == 2 and result["best_value"] == pytest.approx(0.9)
    rows = list(csv.DictReader(open(tmp_path / "runs" / "sweeps" / "p" / "trials.csv")))
    assert sorted(r["state"] for r in rows) == ["complete", "complete", "pruned"]


def test_an_incompatible_trial_fails_alone_and_the_sweep_goes_on(tmp_path, course_data, tiny_model):
    """SMART perturbs BERT's embeddings, which last-linear-layer never runs: that trial fails in one line; the
    other one runs."""
    done = subprocess.run([sys.executable, str(ROOT / "sweep.py"), "classifier", "--sampler", "grid", "--trials", "2",
                           "--space", "fine-tune-mode=full-model,last-linear-layer", "--study", "m", "--no_prune", "--",
                           *[a for a in _base(course_data, tiny_model) if a not in ("--fine-tune-mode", "full-model")],
                           "--smart_weight", "1"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    failed = [l for l in done.stdout.splitlines() if " failed: " in l and l.startswith("trial")]
    assert len(failed) == 1 and "--smart_weight perturbs BERT's embeddings" in failed[0]
    assert "1 complete, 0 pruned, 1 failed on their flags" in done.stdout


@pytest.mark.parametrize("argv, match", [
    (["--space", "lr"], r"--space 'lr': expected FLAG=SPEC"),
    (["--space", "lr=log:1e-3"], r"log needs LO:HI"),
    (["--space", "lr=log:1e-3:1e-4"], r"need LO < HI"),
    (["--space", "lr=log:0:1e-4"], r"LO > 0"),
    (["--space", "lernrate=1e-3,1e-4"], r"unrecognized arguments: --lernrate"),
    (["--space", "lr=-1,1e-4"], r"argument --lr: -1 must be a number > 0"),
    (["--space", "lr=log:1e-5:1e-3", "--sampler", "grid"], r"--sampler grid takes comma lists only"),
    (["--space", "lr=1e-3", "--seeds", "5", "5"], r"--seeds 5 5: a seed given twice"),
    (["--space", "lr=1e-3", "--prune_warmup", "-1"], r"--prune_warmup: -1 must be an integer >= 0"),
    (["--space", "lr=1e-3", "--storage", "notaurl"], r"--storage notaurl: not a database URL"),
    (["--space", "seed=1,2"], r"--seed is set by the sweep"),
    (["--space", "lr=1e-4,2e-4", "lr=1e-3"], r"--space names --lr twice \('lr=1e-4,2e-4' and 'lr=1e-3'\)"),
    (["--space", "batch_size=8,16"], r"--batch_size is searched by --space and also fixed after --: drop one of the two"),
])
def test_bad_input_is_one_line_before_anything_trains(tmp_path, monkeypatch, course_data, tiny_model, argv, match):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MinbertError, match=match):
        sweep.main(["classifier", *argv, "--", *_base(course_data, tiny_model)])
    assert not list(tmp_path.glob("runs/sweeps/*/t*"))


def test_storage_problems_are_one_line(tmp_path, monkeypatch, course_data, tiny_model):
    monkeypatch.chdir(tmp_path)
    base = ["classifier", "--space", "lr=1e-3", "--"] + _base(course_data, tiny_model)
    junk = tmp_path / "junk.db"
    junk.write_text("not a database")
    with pytest.raises(MinbertError, match="is not an SQLite database"):
        sweep.main(base[:3] + ["--storage", f"sqlite:///{junk}"] + base[3:])
    import importlib.util
    if importlib.util.find_spec("psycopg") is None:
        with pytest.raises(MinbertError, match="driver psycopg is not installed"):
            sweep.main(base[:3] + ["--storage", "postgresql://u@127.0.0.1:1/db"] + base[3:])
    else:
        with pytest.raises(MinbertError, match="cannot open the study database"):
            sweep.main(base[:3] + ["--storage", "postgresql://u@127.0.0.1:1/db"] + base[3:])


def test_unknown_trial_flag_and_missing_dataset(tmp_path, monkeypatch, course_data, tiny_model):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MinbertError, match="unrecognized arguments: --bogus"):
        sweep.main(["classifier", "--space", "lr=1e-3,1e-4", "--", *_base(course_data, tiny_model), "--bogus"])
    with pytest.raises(MinbertError, match="a classifier sweep scores one dataset"):
        sweep.main(["classifier", "--space", "lr=1e-3,1e-4", "--", "--epochs", "1"])


def _two_workers(tmp_path, course_data, tiny_model, storage):
    """Two sweep processes started together on one study: four grid points, each evaluated once."""
    argv = ["classifier", "--sampler", "grid", "--space", "lr=1e-3,2e-3,3e-3,4e-3", "--trials", "4", "--study", "w",
            "--no_prune", *(["--storage", storage] if storage else []), "--", *_base(course_data, tiny_model)]
    workers = [_start(tmp_path, argv) for _ in range(2)]
    outs = [w.communicate(timeout=600) for w in workers]
    for w, (out, err) in zip(workers, outs):
        assert w.returncode == 0 and "Traceback" not in err, err[-2000:]
    import optuna
    study = optuna.load_study(study_name="w", storage=storage or f"sqlite:///{tmp_path / 'runs' / 'sweeps' / 'w.db'}")
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    assert sorted(t.params["lr"] for t in complete) == ["1e-3", "2e-3", "3e-3", "4e-3"]
    assert not [t for t in study.trials if t.state.name == "FAIL"]
    assert len({t.user_attrs["worker"] for t in complete}) == 2  # both workers took trials


def test_two_workers_share_a_study_on_sqlite(tmp_path, course_data, tiny_model):
    _two_workers(tmp_path, course_data, tiny_model, None)


def test_two_workers_share_a_study_on_postgresql(tmp_path, course_data, tiny_model, postgres_url):
    _two_workers(tmp_path, course_data, tiny_model, postgres_url)


def test_a_new_study_under_an_old_name_never_writes_into_old_trial_folders(tmp_path):
    """Deleting a study's database and starting again numbers its trials from 0 again."""
    study = tmp_path / "runs" / "sweeps" / "s"
    (study / "t0-s1").mkdir(parents=True)
    (study / "t0-s1-2").mkdir()
    assert sweep.trial_folder(study, 0, 1) == study / "t0-s1-3"
    assert sweep.trial_folder(study, 1, 1) == study / "t1-s1"


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
        sweep.main(["classifier", "--space", space, "--sampler", sampler, "--study", "s", "--", *_base(course_data, tiny_model)])
    assert not list((tmp_path / "runs" / "sweeps").glob("s/t*"))


def test_a_study_continued_with_another_pipeline_flags_or_seeds_is_one_line(tmp_path, course_data, tiny_model):
    """Trials of another pipeline, other fixed flags or other seeds are not comparable with the study's: each is
    refused before anything trains, the study as it was."""
    sweep_flags = ["classifier", "--sampler", "grid", "--space", "lr=1e-3,2e-3", "--trials", "1", "--study", "s", "--no_prune"]
    base = _base(course_data, tiny_model)
    done = subprocess.run([sys.executable, str(ROOT / "sweep.py"), *sweep_flags, "--", *base], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    for flags, trial_flags, match in [
        (["multitask", *sweep_flags[1:]], [b for b in base if b not in ("--datasets", "sst")],
         r"study s: its trials ran classifier trials, not multitask"),
        (sweep_flags, [*base, "--max_length", "16"],
         r"study s: its trials ran with the flags after -- --pretrained .*--smart_weight 0, not --pretrained .*--max_length "
         r"16: the same to continue"),
        ([*sweep_flags, "--seeds", "1", "2"], base, r"study s: its trials ran --seeds 11711, not --seeds 1 2"),
    ]:
        again = subprocess.run([sys.executable, str(ROOT / "sweep.py"), *flags, "--", *trial_flags], cwd=tmp_path,
                               capture_output=True, text=True)
        assert again.returncode == 2 and re.search(match, again.stderr), again.stderr[-2000:]
        assert len(again.stderr.strip().splitlines()) == 1, again.stderr[-2000:]
    assert len(_trials(tmp_path, "s")) == 1


@pytest.mark.parametrize("argv, match", [
    (["--study", "../../x"], r"--study '../../x': names a folder under runs/sweeps/"),
    (["--seeds", "-1"], r"argument --seeds: -1 must be an integer from 0 to 4294967295"),
    (["--sampler", "grid", "--sampler_seed", "3"], r"--sampler_seed seeds TPE's suggestions, which --sampler grid"),
    (["--no_prune", "--prune_startup", "3"], r"--prune_startup tunes the median pruner, which --no_prune turns off"),
])
def test_sweep_flags_are_checked_in_one_line(tmp_path, monkeypatch, course_data, tiny_model, argv, match):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MinbertError, match=match):
        sweep.main(["classifier", "--space", "lr=1e-3", *argv, "--", *_base(course_data, tiny_model)])
    assert not (tmp_path.parent / "x").exists() and not list(tmp_path.glob("runs/sweeps/*/t*"))
