"""One trial of a sweep: the pipeline script run once per seed, each in its own process and run
folder (runs/sweeps/STUDY/tN-sSEED), its per-epoch dev scores read from the run's log as they are
written and fed to the pruner."""
import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

from minbert.sweeps.space import as_argv

ROOT = Path(__file__).resolve().parents[2]  # the project folder: the pipeline scripts run as commands
PIPELINES = {"classifier": ROOT / "classifier.py", "multitask": ROOT / "multitask_classifier.py"}


class TrialProcess:
    """One seed of one trial: the pipeline script in its own process and run folder, its per-epoch dev
    scores read from its log as they are written."""

    def __init__(self, pipeline, argv, folder):
        self.folder, self.seen, self.tail, self.scores = Path(folder), 0, [], []
        cmd = [sys.executable, str(PIPELINES[pipeline]), *argv]
        self.proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True, preexec_fn=_child_setup)
        self.reader = threading.Thread(target=self._read_stderr, daemon=True)
        self.reader.start()

    def _read_stderr(self):
        for line in self.proc.stderr:
            sys.stderr.write(line)
            self.tail = (self.tail + [line.rstrip("\n")])[-5:]

    def new_scores(self):
        """(epoch, dev score) of the epochs logged since the last call."""
        records = []
        for log in sorted(self.folder.glob("*-log.jsonl")):
            for line in log.read_text().splitlines():
                try:
                    r = json.loads(line)
                except json.JSONDecodeError:
                    break  # a line being written: read it next time
                if "dev_score" in r and r.get("epoch", -1) >= 0:
                    records.append((r["epoch"], r["dev_score"]))
        new, self.seen = records[self.seen:], len(records)
        return new

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.reader.join(5)

    def error(self):
        """The trial's own one-line error (or the last line it printed)."""
        lines = [l for l in self.tail if l.strip()]
        errs = [l for l in lines if l.startswith("error: ")]
        return (errs[-1][len("error: "
                             ""):] if errs else lines[-1] if lines else f"exit code {self.proc.returncode}")


def _child_setup():
    """In a trial's process: a process group of its own (Ctrl-C reaches the sweep, which stops
    the trial itself), and on Linux a SIGTERM when the sweep dies, so a killed worker leaves
    no trial training on its own."""
    os.setsid()
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


class TrialFailed(Exception):
    pass


def trial_folder(study_folder, number, seed):
    """runs/sweeps/STUDY/tN-sSEED, or with a suffix when an earlier study of that name left one there."""
    folder, n = study_folder / f"t{number}-s{seed}", 2
    while folder.exists():
        folder, n = study_folder / f"t{number}-s{seed}-{n}", n + 1
    return folder


def trial_argv(pipeline, folder):
    argv = ["--run_dir", str(folder)]
    if pipeline == "classifier":  # the trial's files stay in its run folder: predictions/ is the user's
        return argv + ["--predictions_dir", str(folder)]
    outs = [x for p in ("sst", "para", "sts") for s in ("dev", "test")
            for x in (f"--{p}_{s}_out", str(folder / f"{p}-{s}-output.csv"))]
    return argv + ["--results", str(folder.parent / "multitask-results.csv")] + outs


def run_trial(pipeline, base, values, seeds, study_folder, number, report, poll=1.0):
    """Run every seed; returns the per-seed best dev scores and run folders. `report(step, score)` feeds the
    pruner (it raises to prune); a trial that fails on its own flags raises TrialFailed with its one-line
    error."""
    scores, folders = [], []
    for i, seed in enumerate(seeds):
        folder = trial_folder(study_folder, number, seed)
        argv = base + as_argv(values) + ["--seed", str(seed)] + trial_argv(pipeline, folder)
        proc = TrialProcess(pipeline, argv, folder)
        try:
            while True:
                done = proc.proc.poll() is not None
                for epoch, score in proc.new_scores():
                    proc.scores.append(score)
                    report(1000 * i + epoch, score)  # seed i's epoch e is step 1000 i + e in every trial
                if done:
                    break
                try:
                    proc.proc.wait(poll)  # back at once when the run ends, else after `poll` seconds
                except subprocess.TimeoutExpired:
                    pass
        finally:
            proc.stop()
        if proc.proc.returncode != 0:
            raise TrialFailed(proc.error())
        if not proc.scores:
            raise TrialFailed("the run finished without logging a dev score")
        scores.append(max(proc.scores))
        folders.append(folder)
    return scores, folders
