"""Hyperparameter search over either pipeline's flags, on Optuna, with any number of workers.

    python sweep.py multitask --trials 8 --space lr=log:1e-5:2e-4 hidden_dropout_prob=0.1,0.3 \\
        --seeds 11711 42 -- --epochs 3 --pretrained all-minilm-l6-v2
    python sweep.py classifier --sampler grid --space lr=3e-5,5e-5,1e-4 scheduler=constant,linear \\
        -- --datasets sst --fine-tune-mode full-model --epochs 3 --pretrained all-minilm-l6-v2

--space takes FLAG=SPEC: `log:LO:HI` (log-uniform), `float:LO:HI`, `int:LO:HI`, or a comma list of
choices (the only kind the grid sampler takes). Flags after `--` are passed to every trial. A trial runs
the pipeline script once per seed, each in its own process and run folder (runs/sweeps/STUDY/tN-sSEED),
and scores the mean over seeds of the best dev score (Part 1: the dev accuracy of its one dataset; Part 2:
the multitask dev mean). A median pruner reads every epoch's dev score from the run's log and stops
trials that fall behind. A trial whose flags cannot work together fails alone, in one line, and the
sweep goes on.

Workers: start the same command several times, on one machine or several (with --storage
postgresql://USER:PASSWORD@HOST/DB, a database every machine reaches; the default is SQLite in
runs/sweeps/STUDY.db, fine for workers on one machine). They share the study's trials through the
database: each trial is run once, and --trials counts the study's finished trials, not one worker's.
Each worker keeps a heartbeat on its running trial; a trial whose worker died (killed, machine gone) is
failed once its heartbeat is older than the grace period (at once, when its worker was on this machine
and its process is gone) and queued again with the same flags. Ctrl-C stops this worker's trial (it is
queued again) and prints the command that continues the sweep. Every trial is appended to
runs/sweeps/STUDY/trials.csv; at the end a ranked table (mean and spread over seeds) and the winning
command line are printed.
"""
import csv
import importlib.util
import json
import math
import os
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from flags import (Parser, check_idle_flags, classifier_parser, given_flags, multitask_parser, nonneg_int,
                   positive_int, seed)
from runs import check_run_name
from utils import MinbertError, main_guard, process_alive, set_interrupt_hint

ROOT = Path(__file__).resolve().parent
PIPELINES = {"classifier": ROOT / "classifier.py", "multitask": ROOT / "multitask_classifier.py"}
PARSERS = {"classifier": classifier_parser, "multitask": multitask_parser}
# Flags the sweep sets for every trial: where its files go, and its seed.
RESERVED = ["--seed", "--run_name", "--run_dir", "--checkpoint_dir", "--checkpoint", "--predictions_dir", "--results",
            "--resume", "--eval_only"] + [f"--{p}_{s}_out" for p in ("sst", "para", "sts") for s in ("dev", "test")]
SWEEPS = Path("runs") / "sweeps"  # each study's database, trial folders and trials.csv
HEARTBEAT, GRACE = 20, 60  # seconds: a worker's heartbeat interval, and how old it may get before others step in
WORKER = f"{socket.gethostname()}:{os.getpid()}"


# ----------------------------------------------------------------------------- the search space

def parse_space(items):
    """['lr=log:1e-5:2e-4', 'hidden_dropout_prob=0.1,0.3'] -> {flag: (kind, values)}; a bad item is one line."""
    space, items_of = {}, {}
    for item in items:
        if "=" not in item:
            raise MinbertError(f"--space {item!r}: expected FLAG=SPEC, e.g. lr=log:1e-5:2e-4 or hidden_dropout_prob=0.1,0.3")
        flag, spec = item.split("=", 1)
        flag = flag.lstrip("-")
        if flag_name(flag) in items_of:  # argparse would let the last one win: a sweep the user did not mean
            raise MinbertError(f"--space names {flag_name(flag)} twice ({items_of[flag_name(flag)]!r} and {item!r}): "
                               f"give each flag once, with all its values")
        items_of[flag_name(flag)] = item
        parts = spec.split(":")
        if parts[0] in ("log", "float", "int"):
            if len(parts) != 3:
                raise MinbertError(f"--space {item!r}: {parts[0]} needs LO:HI, e.g. {flag}={parts[0]}:1e-5:1e-3")
            try:
                lo, hi = (int(p) if parts[0] == "int" else float(p) for p in parts[1:])
            except ValueError:
                raise MinbertError(f"--space {item!r}: LO and HI must be numbers") from None
            if not lo < hi or (parts[0] == "log" and lo <= 0):
                raise MinbertError(f"--space {item!r}: need LO < HI" + (" and LO > 0" if parts[0] == "log" else ""))
            space[flag] = (parts[0], (lo, hi))
        else:
            choices = [c for c in spec.split(",") if c]
            if not choices:
                raise MinbertError(f"--space {item!r}: no choices")
            space[flag] = ("choice", choices)
    return space


def flag_name(flag):
    return "--fine-tune-mode" if flag in ("fine_tune_mode", "fine-tune-mode") else f"--{flag}"


def check_flags(pipeline, base, space):
    """Parse the fixed flags, and each value of the space on its own: an unknown flag or a value of the
    wrong type fails here, in one line, before anything trains. Whether values work together is each
    trial's own check (an incompatible trial fails alone)."""
    for reserved in RESERVED:
        if reserved in base or any(flag_name(f) == reserved for f in space):
            raise MinbertError(f"{reserved} is set by the sweep for every trial (seeds: --seeds); drop it from the "
                               f"trial flags")
    for flag in space:
        name = flag_name(flag)
        if any(tok == name or tok.startswith(name + "=") for tok in base):
            raise MinbertError(f"{name} is searched by --space and also fixed after --: drop one of the two (each trial "
                               f"would take the value argparse sees last)")
    parser = PARSERS[pipeline]()
    parser.parse_args(base)
    for flag, (kind, values) in space.items():
        for v in values:
            parser.parse_args(base + [flag_name(flag), str(v)])
    if pipeline == "classifier":
        datasets = parser.parse_args(base).datasets
        if len(datasets) != 1:
            raise MinbertError("a classifier sweep scores one dataset: pass --datasets sst (or cfimdb) after --")


def suggest(trial, space):
    values = {}
    for flag, (kind, vals) in space.items():
        if kind == "log":
            values[flag] = trial.suggest_float(flag, *vals, log=True)
        elif kind == "float":
            values[flag] = trial.suggest_float(flag, *vals)
        elif kind == "int":
            values[flag] = trial.suggest_int(flag, *vals)
        else:
            values[flag] = trial.suggest_categorical(flag, vals)
    return values


def as_argv(values):
    return [x for flag, v in values.items() for x in (flag_name(flag), f"{v:.4g}" if isinstance(v, float) else str(v))]


def distributions(space):
    """The Optuna distribution each flag of `space` is suggested from (what a study's trials record)."""
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
    kinds = {"log": lambda v: FloatDistribution(*v, log=True), "float": lambda v: FloatDistribution(*v),
             "int": lambda v: IntDistribution(*v), "choice": lambda v: CategoricalDistribution(v)}
    return {flag: kinds[kind](values) for flag, (kind, values) in space.items()}


def describe_space(dists):
    """--space's spelling of {flag: distribution}."""
    def one(d):
        if hasattr(d, "choices"):
            return ",".join(map(str, d.choices))
        kind = "log" if getattr(d, "log", False) else "float" if type(d).__name__ == "FloatDistribution" else "int"
        return f"{kind}:{d.low:g}:{d.high:g}"
    return " ".join(f"{flag}={one(d)}" for flag, d in sorted(dists.items()))


def check_same_space(study, space, spelled):
    """A study continues only with the --space its trials were drawn from: Optuna cannot mix two (a grid grown by
    a value, a list turned into a range), and its trials would not be comparable. `spelled` is --space as typed."""
    want = distributions(space)
    for t in study.get_trials(deepcopy=False):
        if t.distributions and t.distributions != want:
            raise MinbertError(f"study {study.study_name}: its trials searched --space {describe_space(t.distributions)}, "
                               f"not {spelled}: give that --space to continue the study, or a new --study for the new space")


def check_same_study(study, pipeline, base, seeds):
    """A study's trials are comparable only when they ran the same pipeline, with the same flags after -- and the
    same seeds: the first worker records them in the study, and a later start with others is one line (its
    winning command would otherwise be built from flags the best trial never ran with)."""
    recorded = [("pipeline", pipeline, "ran {} trials", str),
                ("trial_flags", list(base), "ran with the flags after -- {}", lambda v: " ".join(v) or "(none)"),
                ("seeds", list(seeds), "ran {}", lambda v: "--seeds " + " ".join(map(str, v)))]
    for key, value, ran, spell in recorded:
        before = study.user_attrs.get(key)
        if before is None:
            study.set_user_attr(key, value)
        elif before != value:
            raise MinbertError(f"study {study.study_name}: its trials {ran.format(spell(before))}, not {spell(value)}: "
                               f"the same to continue the study, or a new --study")


def space_size(space):
    """How many distinct configurations the space holds (inf with a range)."""
    return math.prod(len(v) if kind == "choice" else math.inf for kind, v in space.values())


# ----------------------------------------------------------------------------- the study's storage

def open_storage(url, default):
    """An Optuna RDB storage with heartbeats and retries of stale trials; every problem is one line."""
    import optuna
    if url is None:
        default.parent.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{default}"
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if not scheme.split("+")[0] in ("sqlite", "postgresql", "mysql"):
        raise MinbertError(f"--storage {url}: not a database URL; give sqlite:///PATH or "
                           f"postgresql://USER:PASSWORD@HOST:PORT/DATABASE")
    if scheme == "sqlite":
        path = Path(url[len("sqlite:///"):])
        if path.is_dir():
            raise MinbertError(f"--storage {url}: {path} is a folder; the SQLite database is a file")
        if path.is_file() and path.stat().st_size and path.read_bytes()[:16] != b"SQLite format 3\0":
            raise MinbertError(f"--storage {url}: {path} is not an SQLite database; name a new file or an existing study")
        path.parent.mkdir(parents=True, exist_ok=True)
    # SQLAlchemy's driver for each scheme (postgresql:// means psycopg 3 since SQLAlchemy 2.1)
    driver = {"postgresql": "psycopg", "postgresql+psycopg": "psycopg", "postgresql+psycopg2": "psycopg2",
              "mysql": "MySQLdb", "mysql+pymysql": "pymysql"}.get(scheme)
    if driver is not None and importlib.util.find_spec(driver) is None:
        package = {"psycopg": "'psycopg[binary]'", "psycopg2": "psycopg2-binary", "MySQLdb": "mysqlclient"}.get(driver, driver)
        raise MinbertError(f"--storage {url}: its database driver {driver} is not installed (pip install {package})")
    kwargs = {"connect_args": {"timeout": 60}} if scheme == "sqlite" else {"pool_pre_ping": True}
    for attempt in range(5):
        try:
            return optuna.storages.RDBStorage(
                url, engine_kwargs=kwargs, heartbeat_interval=HEARTBEAT, grace_period=GRACE,
                heartbeat_stale_trial_callback=optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=3))
        except Exception as e:  # sqlalchemy's connection and schema errors
            first = str(e).strip().splitlines()[0][:300] if str(e).strip() else type(e).__name__
            # Workers started together on an empty database race to create its tables: the loser tries again.
            if attempt < 4 and any(w in first.lower() for w in ("unique", "already exists", "locked")):
                time.sleep(1 + attempt)
                continue
            raise MinbertError(f"--storage {url}: cannot open the study database ({first})") from None


def reclaim_dead_workers(study):
    """Fail the running trials whose worker process on this machine is gone (a kill -9, a crash) and queue
    them again; trials of workers elsewhere are left to the heartbeat."""
    import optuna
    host = socket.gethostname()
    retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=3)
    for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)):
        worker = t.user_attrs.get("worker", "")
        name, _, pid = worker.rpartition(":")
        if name != host or not pid.isdigit() or process_alive(int(pid)):
            continue
        try:
            if study._storage.set_trial_state_values(t._trial_id, state=optuna.trial.TrialState.FAIL):
                retry(study, t)
                print(f"trial {t.number}: its worker (process {pid}) is gone; queued to run again")
        except optuna.exceptions.UpdateFinishedTrialError:
            pass  # another worker got there first


def finished(study):
    """The trials that count towards --trials: complete, pruned by the pruner, or failed on their own flags
    (not duplicates, not trials stopped by a dead worker or Ctrl-C, which run again)."""
    import optuna
    S = optuna.trial.TrialState
    return [t for t in study.get_trials(deepcopy=False)
            if (t.state == S.COMPLETE or (t.state == S.PRUNED and "duplicate_of" not in t.user_attrs)
                or (t.state == S.FAIL and "error" in t.user_attrs))]


# ----------------------------------------------------------------------------- a trial

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
        return (errs[-1][len("error: "):] if errs else lines[-1] if lines else f"exit code {self.proc.returncode}")


def _child_setup():
    """In a trial's process: a process group of its own (Ctrl-C reaches the sweep, which stops the trial itself), and
    on Linux a SIGTERM when the sweep dies, so a killed worker leaves no trial training on its own."""
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
    return argv + ["--results", str(folder.parent / "multitask-results.csv")] + [
        x for p in ("sst", "para", "sts") for s in ("dev", "test") for x in (f"--{p}_{s}_out", str(folder / f"{p}-{s}-output.csv"))]


def run_trial(pipeline, base, values, seeds, study_folder, number, report, poll=1.0):
    """Run every seed; returns the per-seed best dev scores. `report(step, score)` feeds the pruner (it
    raises to prune); a trial that fails on its own flags raises TrialFailed with its one-line error."""
    scores = []
    for i, seed in enumerate(seeds):
        folder = trial_folder(study_folder, number, seed)
        proc = TrialProcess(pipeline, base + as_argv(values) + ["--seed", str(seed)] + trial_argv(pipeline, folder), folder)
        try:
            while True:
                done = proc.proc.poll() is not None
                for epoch, score in proc.new_scores():
                    proc.scores.append(score)
                    report(1000 * i + epoch, score)  # seed i's epoch e is step 1000 i + e in every trial
                if done:
                    break
                time.sleep(poll)
        finally:
            proc.stop()
        if proc.proc.returncode != 0:
            raise TrialFailed(proc.error())
        if not proc.scores:
            raise TrialFailed("the run finished without logging a dev score")
        scores.append(max(proc.scores))
    return scores


# ----------------------------------------------------------------------------- the sweep

FIELDS = ["trial", "state", "params", "seeds", "scores", "mean", "std", "minutes", "worker", "note"]


def append_row(path, row):
    new = not path.exists()
    with open(path, "a", newline="") as fp:
        w = csv.DictWriter(fp, FIELDS)
        if new:
            w.writeheader()
        w.writerow(row)


def make_sampler(args, space, study):
    import optuna
    if args.sampler == "grid":
        return optuna.samplers.GridSampler({f: v for f, (_, v) in space.items()})
    # A fixed seed would replay the same suggestions every time a worker starts (after a restart, or in
    # a second worker); --sampler_seed makes one worker's suggestions repeatable, shifted by the study's size.
    shifted = None if args.sampler_seed is None else (args.sampler_seed + len(study.get_trials(deepcopy=False))) % 2 ** 32
    return optuna.samplers.TPESampler(seed=shifted)


def sweep(args, base, command):
    """Run this worker's share of the study; `command` is the sweep's own argv (for the Ctrl-C line)."""
    import warnings
    import optuna
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    space = parse_space(args.space)
    if not space:
        raise MinbertError("--space: give at least one FLAG=SPEC")
    if args.sampler == "grid" and any(kind != "choice" for kind, _ in space.values()):
        raise MinbertError("--sampler grid takes comma lists only (e.g. lr=1e-5,3e-5); ranges need --sampler tpe")
    if len(set(args.seeds)) != len(args.seeds):
        raise MinbertError(f"--seeds {' '.join(map(str, args.seeds))}: a seed given twice; each seed runs once per trial")
    check_flags(args.pipeline, base, space)
    study_name = check_run_name(args.study, "--study", SWEEPS) if args.study else f"{args.pipeline}-sweep"
    folder = SWEEPS / study_name
    storage = open_storage(args.storage, folder.parent / f"{study_name}.db")
    pruner = (optuna.pruners.MedianPruner(n_startup_trials=args.prune_startup, n_warmup_steps=args.prune_warmup)
              if args.prune else optuna.pruners.NopPruner())
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # our own one line per trial, not Optuna's tracebacks
    try:
        study = optuna.create_study(study_name=study_name, storage=storage, pruner=pruner, direction="maximize",
                                    load_if_exists=True)
    except Exception as e:
        raise MinbertError(f"study {study_name}: cannot create or load it ({str(e).splitlines()[0][:300]})") from None
    check_same_space(study, space, " ".join(args.space))
    check_same_study(study, args.pipeline, base, args.seeds)
    study.sampler = make_sampler(args, space, study)
    folder.mkdir(parents=True, exist_ok=True)
    csv_path = folder / "trials.csv"
    reclaim_dead_workers(study)
    optuna.storages.fail_stale_trials(study)
    wanted = min(args.trials, space_size(space))
    print(f"study {study_name} in {storage.url}: {len(finished(study))} trial(s) finished before, wanting {wanted}; "
          f"worker {WORKER}; trials logged to {csv_path}")
    seeds = " ".join(map(str, args.seeds))

    def objective(trial):
        values = suggest(trial, space)
        trial.set_user_attr("worker", WORKER)
        trial.set_user_attr("interrupted", False)  # a queued retry carries its original's attributes
        t0 = time.perf_counter()
        row = {"trial": trial.number, "params": " ".join(as_argv(values)), "seeds": seeds, "worker": WORKER}
        minutes = lambda: f"{(time.perf_counter() - t0) / 60:.1f}"  # noqa: E731
        twin = duplicate_of(study, trial, values)
        if twin is not None:
            trial.set_user_attr("duplicate_of", twin)
            print(f"trial {trial.number}: same flags as trial {twin}, which is evaluated once; skipped")
            raise optuna.TrialPruned()
        print(f"trial {trial.number}: {' '.join(as_argv(values))} (seeds {seeds})")

        def report(step, score):
            trial.report(score, step)
            if trial.should_prune():
                append_row(csv_path, {**row, "state": "pruned", "mean": score, "minutes": minutes()})
                print(f"trial {trial.number}: pruned after epoch {step % 1000} of seed {args.seeds[step // 1000]} "
                      f"(dev score {score:.4f})")
                raise optuna.TrialPruned()
        try:
            scores = run_trial(args.pipeline, base, values, args.seeds, folder, trial.number, report)
        except TrialFailed as e:
            trial.set_user_attr("error", str(e))
            append_row(csv_path, {**row, "state": "failed", "minutes": minutes(), "note": str(e)})
            print(f"trial {trial.number} failed: {e}")
            return float("nan")  # Optuna records it as failed; the sweep goes on
        except KeyboardInterrupt:
            trial.set_user_attr("interrupted", True)
            raise
        mean = statistics.fmean(scores)
        std = statistics.stdev(scores) if len(scores) > 1 else 0.0
        trial.set_user_attr("scores", scores)
        append_row(csv_path, {**row, "state": "complete", "scores": " ".join(f"{s:.4f}" for s in scores),
                              "mean": f"{mean:.4f}", "std": f"{std:.4f}", "minutes": minutes()})
        print(f"trial {trial.number}: mean dev score {mean:.4f} over seeds {seeds}")
        return mean

    duplicates = 0
    try:
        while len(finished(study)) + running_elsewhere(study) < wanted and duplicates < 20:
            before = len(study.get_trials(deepcopy=False))
            study.optimize(objective, n_trials=1, catch=())
            last = study.get_trials(deepcopy=False)[before:]
            duplicates = duplicates + 1 if last and all("duplicate_of" in t.user_attrs for t in last) else 0
    except KeyboardInterrupt:
        requeue_interrupted(study)
        set_interrupt_hint(f"this worker's trial was stopped and is queued to run again; continue the sweep with: "
                           f"{shlex.join(['python', 'sweep.py', *command])}")
        raise
    return summarize(study, args, base)


def duplicate_of(study, trial, values):
    """The number of an earlier trial with the same flags that completed or is running, or None."""
    import optuna
    S = optuna.trial.TrialState
    for t in study.get_trials(deepcopy=False, states=(S.COMPLETE, S.RUNNING, S.PRUNED)):
        if t.number < trial.number and t.params == trial.params and "duplicate_of" not in t.user_attrs:
            return t.number
    return None


def running_elsewhere(study):
    """Trials other workers are running now (queued ones are for whichever worker asks next)."""
    import optuna
    return len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)))


def requeue_interrupted(study):
    """Queue again the trial Ctrl-C stopped (Optuna marked it failed), with the same flags."""
    import optuna
    retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=3)
    trials = study.get_trials(deepcopy=False)
    retried = {n for t in trials for n in t.system_attrs.get("retry_history", [])}
    for t in trials:
        if (t.state == optuna.trial.TrialState.FAIL and t.user_attrs.get("interrupted")
                and t.user_attrs.get("worker") == WORKER and t.number not in retried):
            retry(study, t)


def summarize(study, args, base):
    import optuna
    S = optuna.trial.TrialState
    trials = study.get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == S.COMPLETE]
    failed = [t for t in trials if t.state == S.FAIL and "error" in t.user_attrs]
    pruned = [t for t in trials if t.state == S.PRUNED and "duplicate_of" not in t.user_attrs]
    print(f"study {study.study_name}: {len(complete)} complete, {len(pruned)} pruned, {len(failed)} failed on their flags")
    for t in failed:
        print(f"  trial {t.number} failed: {t.user_attrs['error']}")
    if not complete:
        print("no complete trial yet")
        return None
    rows = sorted(complete, key=lambda t: -t.value)
    print(f"{'rank':<5} {'trial':<6} {'mean':<8} {'spread':<8} flags")
    for i, t in enumerate(rows, start=1):
        scores = t.user_attrs.get("scores", [t.value])
        spread = statistics.stdev(scores) if len(scores) > 1 else 0.0
        print(f"{i:<5} {t.number:<6} {t.value:<8.4f} {spread:<8.4f} {' '.join(as_argv(t.params))}")
    best = rows[0]
    command = " ".join(shlex.quote(a) for a in ["python", PIPELINES[args.pipeline].name, *base, *as_argv(best.params)])
    print(f"best: trial {best.number}, mean dev score {best.value:.4f} over seeds {' '.join(map(str, args.seeds))}")
    print(f"winning command: {command}")
    return {"best_value": best.value, "best_params": best.params, "command": command, "trials": len(complete)}


def build_parser():
    ap = Parser(prog="sweep.py", description="Optuna search over a pipeline's flags; workers share a study.")
    ap.add_argument("pipeline", choices=sorted(PIPELINES), help="classifier.py or multitask_classifier.py")
    ap.add_argument("--trials", type=positive_int, default=8, help="finished trials wanted in the study (all workers)")
    ap.add_argument("--space", nargs="+", default=[], metavar="FLAG=SPEC",
                    help="the flags searched: FLAG=log:LO:HI, float:LO:HI, int:LO:HI, or a comma list of choices")
    ap.add_argument("--seeds", type=seed, nargs="+", default=[11711], help="every trial runs once per seed")
    ap.add_argument("--sampler", choices=["tpe", "grid"], default="tpe",
                    help="Optuna's TPE, or every combination of the comma lists")
    ap.add_argument("--sampler_seed", type=seed, default=None,
                    help="make TPE's suggestions repeatable (default: fresh each start, so workers and restarts differ)")
    ap.add_argument("--study", default=None, help="study name (default: PIPELINE-sweep)")
    ap.add_argument("--storage", default=None,
                    help="sqlite:///PATH or postgresql://USER:PASSWORD@HOST/DB (default: SQLite in runs/sweeps/)")
    ap.add_argument("--no_prune", dest="prune", action="store_false", help="never stop a trial early")
    ap.add_argument("--prune_startup", type=positive_int, default=2, help="trials finished before pruning starts")
    ap.add_argument("--prune_warmup", type=nonneg_int, default=0, help="epochs of every trial never pruned")
    return ap


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    base = []
    command = list(argv)
    if "--" in argv:
        i = argv.index("--")
        argv, base = argv[:i], argv[i + 1:]
    args = build_parser().parse_args(argv)
    check_idle_flags(args, given_flags(build_parser(), argv), SWEEP_IDLE)
    return sweep(args, base, command)


# The sweep's own flags that act only with others (flags.check_idle_flags).
SWEEP_IDLE = {
    "sampler_seed": (lambda a, t: a.sampler == "tpe", "seeds TPE's suggestions, which --sampler grid does not draw"),
    **{f: (lambda a, t: a.prune, "tunes the median pruner, which --no_prune turns off")
       for f in ("prune_startup", "prune_warmup")},
}


if __name__ == "__main__":
    main_guard(main)
