"""runs/lock.py: a run folder is one process's: a second process is refused naming the first, a lock left by a
killed process is stale, two runs started at once leave one run, and without flock the process id decides."""
import json
import os
import signal
import subprocess
import sys

import pytest

import multitask_classifier as mt
from minbert.runs import lock
from minbert.runs.lock import RUN_MARK, RunLock
from tests.course import ROOT, part2_args
from utils import MinbertError


def _quick(tmp_path, data, model, *extra):
    """A two-step multitask run (the shared argument builder, shortened)."""
    return part2_args(tmp_path, data, model, "--epochs", "1", "--steps_per_epoch", "2", *extra)


_HOLD = """
import sys, time
sys.path.insert(0, {root!r})
from minbert.runs.folders import open_run
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
    cmd = [sys.executable, str(ROOT / "multitask_classifier.py")]
    procs = [subprocess.Popen(cmd + _quick(tmp_path, course_data, tiny_model, "--lr", lr), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
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


def test_a_pipelines_run_is_named_with_its_article():
    assert lock.a_run_of("ensemble") == "an ensemble.py run" and lock.a_run_of("classifier") == "a classifier.py run"
    assert lock.a_run_of("eval") == "a multitask_classifier.py --eval_only run"


@pytest.mark.parametrize("stop_at", ["write", "ftruncate"])
def test_a_run_stopped_while_writing_its_mark_leaves_a_record_the_next_reader_reads(tmp_path, monkeypatch, stop_at):
    """Ctrl-C (or a kill) between the calls that rewrite `.minbert-run` leaves the old record or the new one,
    never an empty file: the new record is written over the old before the file is cut to its length."""
    folder = tmp_path / "run"
    held = RunLock(folder).acquire("--run_dir", "multitask").claim()
    held.note("outputs", {"predictions/a-very-long-name-so-the-old-record-is-the-longer-one.csv": "x" * 200})
    calls = []

    def stopped(*args):  # Ctrl-C arriving as this call starts
        calls.append(stop_at)
        raise KeyboardInterrupt
    monkeypatch.setattr(lock.os, stop_at, stopped)
    with pytest.raises(KeyboardInterrupt):
        held.note("outputs", {})
    monkeypatch.undo()
    assert calls == [stop_at]
    info = lock.read_mark(folder)
    assert info["pipeline"] == "multitask" and info["pid"] == os.getpid()
    # stopped before the write: the old record; after it: the new one, with the old one's tail behind it
    assert info["outputs"] == ({} if stop_at == "ftruncate" else
                               {"predictions/a-very-long-name-so-the-old-record-is-the-longer-one.csv": "x" * 200})
    held.release()
    assert json.loads((folder / RUN_MARK).read_text())["pid"] is None  # released: one record, cut to its length


def test_a_held_folder_is_named_as_the_user_typed_it(tmp_path, monkeypatch):
    """`--run_name tw` refused because another process holds runs/tw names `--run_name tw`, not a flag the
    user never typed with a path they never gave."""
    from minbert.runs.folders import open_run
    monkeypatch.chdir(tmp_path)
    proc = _holder(tmp_path / "runs" / "tw")
    try:
        with pytest.raises(MinbertError, match=r"^--run_name tw \(runs/tw\): in use by another run"):
            open_run("multitask", ["multitask"], run_name="tw", root="runs")
        with pytest.raises(MinbertError, match=rf"^--run_dir {tmp_path}/runs/tw: in use by another run"):
            open_run("multitask", ["multitask"], run_dir=str(tmp_path / "runs" / "tw"))
    finally:
        proc.kill()
        proc.wait()


def test_a_record_written_in_part_is_an_error_and_the_old_record_stays(tmp_path, monkeypatch):
    """A full disk writes part of the new record: refused before the file is cut into it; a whole write is kept."""
    folder = tmp_path / "run"
    held = RunLock(folder).acquire("--run_dir", "multitask").claim()
    real = os.write
    monkeypatch.setattr(lock.os, "write", lambda fd, data: real(fd, data[:3]))
    with pytest.raises(OSError, match="written in part"):
        held.note("outputs", {"a": "x" * 500})
    monkeypatch.undo()
    assert lock.read_mark(folder)["pipeline"] == "multitask"  # the old record, read first in the file
    held.note("outputs", {"a": "x"})
    assert json.loads((folder / RUN_MARK).read_text())["outputs"] == {"a": "x"}
    held.release()


@pytest.mark.parametrize("kind, what", [("folder", "a folder"), ("link", "a link"), ("pipe", "a named pipe")])
def test_a_mark_that_is_no_file_is_one_line(tmp_path, kind, what):
    """A run's .minbert-run made a folder (or a link, a pipe) by hand: one line (a folder had been a traceback)."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "multitask-log.jsonl").write_text("{}\n")
    mark = folder / RUN_MARK
    {"folder": mark.mkdir, "link": lambda: mark.symlink_to(folder / "multitask-log.jsonl"),
     "pipe": lambda: os.mkfifo(mark)}[kind]()
    with pytest.raises(MinbertError, match=rf"^--run_dir .*run: its .minbert-run is {what}, where the run keeps its "
                                           r"record"):
        RunLock(folder).acquire("--run_dir", "multitask")
    assert (folder / "multitask-log.jsonl").read_text() == "{}\n"
