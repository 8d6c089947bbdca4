"""Process control: the devices a test runs on, scripts run as a user runs them (one-line errors), runs
interrupted at a chosen moment, and sweeps started, stopped and inspected (with a PostgreSQL server's
programs)."""
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from minbert.training.trainer import Trainer
from tests.course import ROOT


# The devices a test of a device path runs on: the CPU always, CUDA where a GPU is there (reported as skipped elsewhere).
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU"))]


def device_flags(device):
    """The pipelines' flags that put a run on `device`: --use_gpu for "cuda", none for the CPU."""
    return ["--use_gpu"] if device == "cuda" else []


def interrupt_second_epoch(monkeypatch):
    """Make Trainer.run_epoch raise KeyboardInterrupt on its second call (the machine goes away during the
    second epoch); returns a function that puts the real one back."""
    real, calls = Trainer.run_epoch, []

    def interrupted(self, *a, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, *a, **kw)
    monkeypatch.setattr(Trainer, "run_epoch", interrupted)
    return lambda: monkeypatch.setattr(Trainer, "run_epoch", real)


def epochs_run(monkeypatch):
    """Record each epoch Trainer.run_epoch trains from now on: a list of the epochs' names ("mt epoch 1", ...),
    so that a test sees which epochs a (resumed) run actually trained, not only what it wrote."""
    real, names = Trainer.run_epoch, []

    def counted(self, batches, total, desc="train", **kw):
        names.append(desc)
        return real(self, batches, total, desc=desc, **kw)
    monkeypatch.setattr(Trainer, "run_epoch", counted)
    return names


def postgres_bin(name):
    import glob
    import shutil
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))), None)
    return found


def sweep_base(course_data, tiny_model, epochs=1, smart_weight=0):
    """Part 1 flags of a tiny SST run, for the trials of a sweep."""
    return ["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--datasets", "sst",
            "--fine-tune-mode", "full-model", "--batch_size", "8", "--epochs", str(epochs), "--smart_weight",
            str(smart_weight)]


def sweep_trials(tmp_path, study):
    """The Optuna trials of a study in the default SQLite storage under tmp_path."""
    import optuna  # here, not at the top: the GPU checks run these tests where optuna is not installed
    return optuna.load_study(study_name=study, storage=f"sqlite:///{tmp_path / 'runs' / 'sweeps' / (study + '.db')}").trials


def _ctrl_c_reaches_python():
    # A job that a non-interactive shell starts in the background (`pytest ... &` in a script, as CI or nohup
    # may) inherits SIGINT ignored, and Python then installs no KeyboardInterrupt handler: the sweep would
    # never see the test's Ctrl-C. A user's terminal gives the default disposition, as this does.
    signal.signal(signal.SIGINT, signal.SIG_DFL)


# The pipeline script that trains nothing (tests/stub_trial.py): the sweep machinery's tests run their trials on it.
STUB_TRIAL = Path(__file__).resolve().parent / "stub_trial.py"

# sweep.py as a process whose trials run STUB_TRIAL instead of the pipeline scripts.
_SWEEP_ON_STUBS = """
import sys
sys.path.insert(0, {root!r})
from minbert.sweeps import trials
trials.PIPELINES.update(classifier=trials.Path({stub!r}), multitask=trials.Path({stub!r}))
import sweep
from utils import main_guard
main_guard(lambda: sweep.main(sys.argv[1:]))
"""


def stub_trials(monkeypatch):
    """In this process, sweeps run their trials on STUB_TRIAL."""
    from minbert.sweeps import trials
    for pipeline in ("classifier", "multitask"):
        monkeypatch.setitem(trials.PIPELINES, pipeline, STUB_TRIAL)


def start_sweep(tmp_path, argv, hold=None):
    """sweep.py started as a process group of its own, Ctrl-C reaching it as it does from a terminal, its trials run
    on STUB_TRIAL; with `hold`, that trial's process stops itself after its first epoch (tests/stub_trial.py)."""
    env = {k: v for k, v in os.environ.items() if k != "MINBERT_TEST_HOLD_TRIAL"}
    if hold is not None:
        env["MINBERT_TEST_HOLD_TRIAL"] = str(hold)
    return subprocess.Popen([sys.executable, "-c", _SWEEP_ON_STUBS.format(root=str(ROOT), stub=str(STUB_TRIAL)),
                             *argv], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            start_new_session=True, preexec_fn=_ctrl_c_reaches_python)


def child_pids(pid):
    """The pids of `pid`'s child processes (Linux: /proc/PID/task/*/children)."""
    pids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            pids += [int(c) for c in (task / "children").read_text().split()]
        except FileNotFoundError:  # a thread that ended between the listing and the read
            pass
    return pids


def _stopped(pid):
    """Whether process `pid` is stopped (state T in /proc/PID/stat), as a held trial stops itself."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except FileNotFoundError:
        return False


def _held(proc, trial_started):
    """The pid of the sweep `proc`'s trial process once it has stopped itself (start_sweep's `hold`: it stops
    right after logging its first epoch, so it cannot finish on its own). The test never stops it: a SIGCONT
    sent before a trial's own SIGSTOP would leave it stopped for good, and the test waiting on it forever."""
    while True:
        assert proc.poll() is None, "the sweep ended before its held trial stopped"
        trial = child_pids(proc.pid)
        if trial_started() and len(trial) == 1 and _stopped(trial[0]):
            return trial[0]
        time.sleep(0.02)


def held_first_trial(proc):
    """Wait until the sweep `proc` (started with hold=0) runs its first trial and that trial has stopped itself
    mid-run; return its pid and the sweep's output so far. The sweep itself keeps running (its heartbeat goes
    on), so to other workers the trial is simply running, however long they take; SIGCONT lets it finish."""
    out = []
    for line in proc.stdout:
        out.append(line)
        if re.match(r"trial \d+: --", line):
            break
    return _held(proc, lambda: True), out


def stop_during_trial(proc, study_folder, number, sig):
    """Send `sig` to the sweep while trial `number`'s process (started with hold=number) is provably mid-run;
    returns its output.

    Nothing here waits on a clock: the trial's first epoch line in its log says it is training, and the trial
    has then stopped itself (tests/stub_trial.py), so that it cannot finish before the signal lands, however busy
    the machine. It is let go (SIGCONT) once the signal is sent."""
    out = []
    for line in proc.stdout:
        out.append(line)
        if line.startswith(f"trial {number}: --"):
            break
    logged = lambda: bool([p for p in study_folder.glob(f"t{number}-s*/*-log.jsonl")  # noqa: E731
                           if p.read_text().strip()])
    trial = _held(proc, logged)
    try:
        os.killpg(proc.pid, sig) if sig == signal.SIGKILL else proc.send_signal(sig)
    finally:
        try:
            os.kill(trial, signal.SIGCONT)
        except ProcessLookupError:
            pass
    rest, err = proc.communicate(timeout=600)
    return "".join(out) + rest, err


def cli(script, *args, cwd=ROOT):
    """Run one of the project's commands (`script`, relative to the project folder) as a user would, in a process
    of its own: for what only a process shows (exit codes of the interpreter, signals, imports, torchrun)."""
    return subprocess.run([sys.executable, str(ROOT / script), *args], cwd=cwd, capture_output=True, text=True)


def run_main(script, *args, cwd=ROOT):
    """Run one of the project's commands in this process, as `python SCRIPT ARGS` would from `cwd`: its main()
    under utils.main_guard (a MinbertError is one line on stderr and exit code 2, Ctrl-C 130), its output
    captured. Returns what cli() returns (a CompletedProcess) without the 4-6 s of a new process importing torch;
    an error main_guard lets through (a bug) is raised here, with its traceback."""
    import contextlib
    import importlib
    import io
    from utils import main_guard
    name = str(Path(script).with_suffix("")).replace("/", ".")
    module = importlib.import_module(name)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), contextlib.chdir(cwd):
        try:
            main_guard(lambda: module.main([str(a) for a in args]))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 0 if e.code is None else 1
            if not isinstance(e.code, int) and e.code is not None:
                print(e.code, file=sys.stderr)  # sys.exit("message"): Python prints it
    return subprocess.CompletedProcess([script, *args], code, out.getvalue(), err.getvalue())


def one_line_error(out, pattern):
    """The command failed with exit code 2 and one stderr line matching `pattern`, no traceback."""
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and re.search(pattern, err[0]), out.stderr
