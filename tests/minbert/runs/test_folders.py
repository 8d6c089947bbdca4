"""runs.py: a run folder is one process's and one pipeline's; a folder no run wrote is refused; --run_name and
--study stay under runs/; no output names an input, another output or a file in another run's folder; a file
no run wrote is never replaced without a dated backup and a line saying so."""
import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import classifier
import ensemble
import multitask_classifier as mt
import pretrain
import report
import runs
from conftest import ROOT, part1_args, part2_args
from runs import RUN_MARK, RunLock
from utils import MinbertError


def _snapshot(folder):
    """{relative path: sha256} of every file under `folder`."""
    folder = Path(folder)
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _quick(tmp_path, data, model, *extra):
    """A two-step multitask run (the shared argument builder, shortened)."""
    return part2_args(tmp_path, data, model, "--epochs", "1", "--steps_per_epoch", "2", *extra)


# ----------------------------------------------------------------------------- one process per run folder

_HOLD = """
import sys, time
sys.path.insert(0, {root!r})
from runs import open_run
run = open_run("multitask", ["multitask"], run_dir={folder!r})
print("locked", flush=True)
time.sleep(600)
"""


def _holder(folder):
    """A process holding `folder`'s lock, started and waited for by what it prints (not by a clock)."""
    proc = subprocess.Popen([sys.executable, "-c", _HOLD.format(root=str(ROOT), folder=str(folder))],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_a_second_process_on_one_run_folder_is_refused_naming_the_first(tmp_path, course_data, tiny_model):
    folder = tmp_path / "ck"
    holder = _holder(folder)
    try:
        with pytest.raises(MinbertError, match=rf"in use by another run \(process {holder.pid} on .*wait for it to end"):
            mt.main(_quick(tmp_path, course_data, tiny_model))
        assert sorted(p.name for p in folder.iterdir()) == [RUN_MARK]  # the refused run wrote nothing
    finally:
        holder.kill()
        holder.wait()


def test_a_lock_left_by_a_killed_process_is_recognised_as_stale(tmp_path, course_data, tiny_model):
    folder = tmp_path / "ck"
    holder = _holder(folder)
    holder.send_signal(signal.SIGKILL)  # kill -9: no chance to release anything
    holder.wait()
    mt.main(_quick(tmp_path, course_data, tiny_model))
    assert (folder / "mt.pt").is_file()
    info = json.loads((folder / RUN_MARK).read_text())
    assert info["pipeline"] == "multitask" and info["pid"] is None  # released at the end


def test_two_runs_started_at_once_with_one_name_one_is_refused(tmp_path, course_data, tiny_model):
    """The race of two identical commands: whichever takes the lock second is refused before writing anything,
    and the folder holds one configuration's log."""
    cmd = [sys.executable, str(ROOT / "multitask_classifier.py"), *_quick(tmp_path, course_data, tiny_model)]
    procs = [subprocess.Popen(cmd + ["--lr", lr], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for lr in ("1e-3", "5e-4")]
    outs = [p.communicate(timeout=600) for p in procs]
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 2], outs
    err = next(e for p, (_, e) in zip(procs, outs) if p.returncode == 2).strip().splitlines()
    assert len(err) == 1 and ("in use by another run" in err[0] or "already holds a run" in err[0]), err
    log = [json.loads(l) for l in (tmp_path / "ck" / "mt-log.jsonl").read_text().splitlines()]
    assert len(log) == 1


def test_without_flock_the_process_id_in_the_lock_file_decides(tmp_path, monkeypatch):
    """Some network file systems have no flock: there the lock file's process id is checked instead."""
    import fcntl

    def no_flock(fd, op):
        raise OSError(38, "Function not implemented")
    monkeypatch.setattr(fcntl, "flock", no_flock)
    folder = tmp_path / "run"
    folder.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    import socket
    for pid, refused in ((int(dead.stdout), False), (os.getppid(), True)):
        (folder / RUN_MARK).write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "pipeline": "multitask"}))
        if refused:
            with pytest.raises(MinbertError, match=f"in use by another run \\(process {pid}"):
                RunLock(folder).acquire("--run_dir", "multitask")
        else:
            RunLock(folder).acquire("--run_dir", "multitask").release()


def test_a_run_folder_belongs_to_one_pipeline(tmp_path, course_data, tiny_model):
    mt.main(_quick(tmp_path, course_data, tiny_model))
    before = _snapshot(tmp_path / "ck")
    with pytest.raises(MinbertError, match="the run folder of a multitask_classifier.py run; a classifier.py run"):
        classifier.main(part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst"))
    with pytest.raises(MinbertError, match="--out .*ck: the run folder of a multitask_classifier.py run; a pretrain.py"):
        pretrain.main(["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--out", str(tmp_path / "ck")])
    assert _snapshot(tmp_path / "ck") == before


# ----------------------------------------------------------------------------- what a run folder may be

def test_a_folder_no_run_wrote_is_refused_and_left_as_it_was(tmp_path, course_data, tiny_model, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "sst-dev-output.csv").write_text("my own file\n")
    for folder in (mine, course_data):  # a folder of the user's, and the data folder itself
        before = _snapshot(folder)
        with pytest.raises(MinbertError, match=f"--run_dir {folder}: not a run folder: it holds files no run wrote"):
            mt.main(_quick(tmp_path, course_data, tiny_model, "--run_dir", str(folder)))
        assert _snapshot(folder) == before
    empty = tmp_path / "empty"
    empty.mkdir()
    mt.main(_quick(tmp_path, course_data, tiny_model, "--run_dir", str(empty)))  # an empty folder is fine
    assert (empty / "mt.pt").is_file() or (empty / "multitask.pt").is_file()


@pytest.mark.parametrize("name", ["../../x", "../x", "/tmp/x", ".", "a/../../b", " x"])
def test_run_name_stays_under_runs(tmp_path, course_data, tiny_model, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MinbertError, match=r"--run_name .*names a folder under runs/.*never one outside it"):
        mt.main(["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--run_name", name])
    assert not (tmp_path.parent / "x").exists() and not (tmp_path / "runs").exists()


def test_a_nested_run_name_is_a_folder_under_runs(tmp_path, course_data, tiny_model, monkeypatch):
    monkeypatch.chdir(tmp_path)
    classifier.main(["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--datasets", "sst",
                     "--epochs", "1", "--run_name", "exp/a"])
    assert (tmp_path / "runs" / "exp" / "a" / "last-linear-layer-sst.pt").is_file()


# ----------------------------------------------------------------------------- outputs and inputs

def test_no_output_may_name_an_input(tmp_path, course_data, tiny_model):
    data = _snapshot(course_data)
    with pytest.raises(MinbertError, match=r"--sst_dev_out .*ids-sst-dev.csv: is the --sst_dev data file, which this "
                                           r"run reads"):
        mt.main(_quick(tmp_path, course_data, tiny_model, "--sst_dev_out", str(course_data / "ids-sst-dev.csv")))
    with pytest.raises(MinbertError, match=r"--results .*sts-dev.csv: not a results table"):
        mt.main(_quick(tmp_path, course_data, tiny_model, "--results", str(course_data / "sts-dev.csv")))
    assert _snapshot(course_data) == data
    # --eval_only: the checkpoint it reads is an input too
    mt.main(_quick(tmp_path, course_data, tiny_model))
    ckpt = tmp_path / "ck" / "mt.pt"
    saved = ckpt.read_bytes()
    with pytest.raises(MinbertError, match=r"--sst_test_out .*mt.pt: is the --eval_only checkpoint"):
        mt.main(_quick(tmp_path, course_data, tiny_model, "--eval_only", str(ckpt), "--sst_test_out", str(ckpt)))
    assert ckpt.read_bytes() == saved


def test_two_outputs_naming_one_file_are_refused(tmp_path, course_data, tiny_model):
    same = str(tmp_path / "out.csv")
    with pytest.raises(MinbertError, match=r"--para_dev_out .*out.csv: --sst_dev_out .*out.csv names the same file"):
        mt.main(_quick(tmp_path, course_data, tiny_model, "--sst_dev_out", same, "--para_dev_out", same))


def test_an_output_inside_another_runs_folder_is_refused(tmp_path, course_data, tiny_model):
    mt.main(_quick(tmp_path / "a", course_data, tiny_model))
    other = tmp_path / "a" / "ck"
    before = _snapshot(other)
    with pytest.raises(MinbertError, match=r"--sst_dev_out .*: inside .*a/ck, the folder of another run"):
        mt.main(_quick(tmp_path / "b", course_data, tiny_model, "--sst_dev_out", str(other / "sst-dev-output.csv")))
    with pytest.raises(MinbertError, match=r"--out .*: inside .*a/ck, the folder of another run"):
        ensemble.main([str(other / "mt.pt"), str(tmp_path / "a" / "pred"), "--data_dir", str(course_data),
                       "--run_dir", str(tmp_path / "ens"), "--out", str(other)])
    mt.main(_quick(tmp_path / "b", course_data, tiny_model))
    with pytest.raises(MinbertError, match=r"--out .*a/ck: inside .*a/ck, the folder of a run this report is not about"):
        report.main([str(tmp_path / "b" / "ck"), "--out", str(other)])
    assert _snapshot(other) == before
    report.main([str(tmp_path / "a" / "ck"), "--out", str(other)])  # into the folder of the run it is about: taken
    assert (other / "report.md").is_file()


# ----------------------------------------------------------------------------- publishing keeps the user's files

def test_publishing_keeps_a_file_no_run_wrote_as_a_dated_backup(tmp_path, course_data, tiny_model, capsys):
    pred = tmp_path / "pred"
    pred.mkdir()
    (pred / "sst-dev-output.csv").write_text("the user's own predictions\n")
    mt.main(_quick(tmp_path, course_data, tiny_model))
    out = capsys.readouterr().out
    backups = list(pred.glob("sst-dev-output.csv.*.bak"))
    assert len(backups) == 1 and backups[0].read_text() == "the user's own predictions\n"
    line = [l for l in out.splitlines() if l.startswith("kept files that no run wrote")]
    assert len(line) == 1 and f"{pred / 'sst-dev-output.csv'} -> {backups[0].name}" in line[0]
    # a published file the user edited afterwards is theirs now: kept too, when the next run publishes
    (pred / "sts-dev-output.csv").write_text("edited by hand\n")
    mt.main(_quick(tmp_path / "again", course_data, tiny_model, *[x for t in ("sst", "para", "sts") for s in ("dev", "test")
                                                                 for x in (f"--{t}_{s}_out", str(pred / f"{t}-{s}-output.csv"))]))
    edited = list(pred.glob("sts-dev-output.csv.*.bak"))
    assert len(edited) == 1 and edited[0].read_text() == "edited by hand\n"
    assert len(list(pred.glob("*.bak"))) == 2  # what the first run wrote was replaced, not backed up


def test_ensemble_out_into_a_users_folder_keeps_their_file(tmp_path, course_data, tiny_model, capsys):
    mt.main(_quick(tmp_path, course_data, tiny_model))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "para-test-output.csv").write_text("mine\n")
    ensemble.main([str(tmp_path / "ck" / "mt.pt"), str(tmp_path / "pred"), "--data_dir", str(course_data),
                   "--run_dir", str(tmp_path / "ens"), "--out", str(mine)])
    assert [p.read_text() for p in mine.glob("para-test-output.csv.*.bak")] == ["mine\n"]
    assert "kept files that no run wrote" in capsys.readouterr().out


def test_report_out_keeps_a_users_file(tmp_path, course_data, tiny_model, capsys):
    mt.main(_quick(tmp_path, course_data, tiny_model))
    out = tmp_path / "notes"
    out.mkdir()
    (out / "report.md").write_text("my notes\n")
    report.main([str(tmp_path / "ck"), "--out", str(out)])
    assert [p.read_text() for p in out.glob("report.md.*.bak")] == ["my notes\n"]
    report.main([str(tmp_path / "ck"), "--out", str(out)])  # its own report is replaced, not backed up again
    assert len(list(out.glob("*.bak"))) == 1


def test_the_submission_zip_leaves_out_backups(tmp_path):
    import zipfile
    import prepare_submit
    (tmp_path / "predictions").mkdir()
    (tmp_path / "predictions" / "sst-dev-output.csv.20260101-000000.bak").write_text("old\n")
    (tmp_path / "x.py").write_text("")
    (tmp_path / "predictions" / "notes.txt").write_text("kept\n")
    monkeypatched = prepare_submit.problems_with
    try:
        prepare_submit.problems_with = lambda *a: []
        out = prepare_submit.build(tmp_path, part="2")
    finally:
        prepare_submit.problems_with = monkeypatched
    names = zipfile.ZipFile(out).namelist()
    assert "predictions/notes.txt" in names and not any(n.endswith(".bak") for n in names)


def test_protect_and_record_unit(tmp_path):
    a = tmp_path / "a.csv"
    a.write_text("user\n")
    kept = runs.protect([a, tmp_path / "absent.csv"])
    assert len(kept) == 1 and not a.exists() and kept[0][1].read_text() == "user\n"
    a.write_text("run\n")
    runs.record([a], "r1", tmp_path)
    assert runs.written_by(a)["run"] == "r1" and runs.protect([a]) == []
    a.write_text("changed\n")
    assert runs.written_by(a) is None and len(runs.protect([a])) == 1
