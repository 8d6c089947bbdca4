"""A study's database and the workers sharing it: Optuna's RDB storage with heartbeats (a trial
whose worker died runs again), the trials that count, and the checks that a worker continues the
study its trials belong to."""
import contextlib
import importlib.util
import logging
import os
import socket
import time
from pathlib import Path

import optuna

from minbert.cli import MinbertError, process_alive
from minbert.project_paths import check_output
from minbert.sweeps.space import describe_space, distributions

# seconds: a worker's heartbeat interval, and how old it may get before others step in
HEARTBEAT, GRACE = 20, 60
WORKER = f"{socket.gethostname()}:{os.getpid()}"


def optuna_tables(path):
    """Whether the SQLite database at `path` is Optuna's (or empty): its tables, read without changing the file."""
    import sqlite3
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.Error:
        return True  # locked by a worker, say: Optuna's own error is the one line
    return not tables or {"studies", "version_info"} <= tables


def _not_a_ctrl_c(record):
    """SQLAlchemy's pool logs, with its traceback, an exception met while it returns a connection, and a Ctrl-C
    landing there is one: the sweep's own line says what the interrupt stopped, so that record is dropped."""
    return not (record.exc_info and isinstance(record.exc_info[1], KeyboardInterrupt))


logging.getLogger("sqlalchemy.pool").addFilter(_not_a_ctrl_c)


def open_storage(url, default):
    """An Optuna RDB storage with heartbeats and retries of stale trials; every problem is one line."""
    if url is None:
        default.parent.mkdir(parents=True, exist_ok=True)
        url = f"sqlite:///{default}"
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if not scheme.split("+")[0] in ("sqlite", "postgresql", "mysql"):
        raise MinbertError(f"--storage {url}: not a database URL; give sqlite:///PATH or "
                           f"postgresql://USER:PASSWORD@HOST:PORT/DATABASE")
    if scheme == "sqlite":
        if url[len("sqlite:///"):] in ("", ":memory:") or not url.startswith("sqlite:///"):
            raise MinbertError(f"--storage {url}: an in-memory SQLite database lives in one process, but a "
                               "study is shared by its trials, its heartbeat "
                               "and other workers: give a file, sqlite:///PATH")
        path = Path(url[len("sqlite:///"):])
        if path.is_dir():
            raise MinbertError(f"--storage {url}: {path} is a folder; the SQLite database is a file")
        check_output(path, f"--storage {url}", append=True)  # the one rule for written files (project_paths.py)
        if path.is_file() and path.stat().st_size and path.read_bytes()[:16] != b"SQLite format 3\0":
            raise MinbertError(f"--storage {url}: {path} is not an SQLite "
                               "database; name a new file or an existing study")
        if path.is_file() and path.stat().st_size and not optuna_tables(path):
            raise MinbertError(f"--storage {url}: {path} is an SQLite database of something else (no Optuna "
                               "study in it), which Optuna would add its "
                               "tables to: name a new file or an existing study")
        path.parent.mkdir(parents=True, exist_ok=True)
    # SQLAlchemy's driver for each scheme (postgresql:// means psycopg 3 since SQLAlchemy 2.1)
    driver = {"postgresql": "psycopg", "postgresql+psycopg": "psycopg", "postgresql+psycopg2": "psycopg2",
              "mysql": "MySQLdb", "mysql+pymysql": "pymysql"}.get(scheme)
    if driver is not None and importlib.util.find_spec(driver) is None:
        package = {"psycopg": "'psycopg[binary]'", "psycopg2": "psycopg2-binary",
                   "MySQLdb": "mysqlclient"}.get(driver, driver)
        raise MinbertError(f"--storage {url}: its database driver {driver} "
                           f"is not installed (pip install {package})")
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
    S = optuna.trial.TrialState
    return [t for t in study.get_trials(deepcopy=False)
            if (t.state == S.COMPLETE or (t.state == S.PRUNED and "duplicate_of" not in t.user_attrs)
                or (t.state == S.FAIL and "error" in t.user_attrs))]


def check_same_space(study, space, spelled):
    """A study continues only with the --space its trials were drawn from: Optuna cannot mix two (a
    grid grown by a value, a list turned into a range), and its trials would not be comparable.
    `spelled` is --space as typed."""
    want = distributions(space)
    for t in study.get_trials(deepcopy=False):
        if t.distributions and t.distributions != want:
            raise MinbertError(f"study {study.study_name}: its trials searched --space "
                               f"{describe_space(t.distributions)}, not {spelled}: give that --space to "
                               "continue the study, or a new --study for the new space")


def check_same_study(study, pipeline, base, seeds):
    """A study's trials are comparable only when they ran the same pipeline, with the same flags after -- and
    the same seeds: the first worker records them in the study, and a later start with others is one line (its
    winning command would otherwise be built from flags the best trial never ran with)."""
    recorded = [("pipeline", pipeline, "ran {} trials", str),
                ("trial_flags", list(base), "ran with the "
                                            "flags after -- {}", lambda v: " ".join(v) or "(none)"),
                ("seeds", list(seeds), "ran {}", lambda v: "--seeds " + " ".join(map(str, v)))]
    for key, value, ran, spell in recorded:
        before = study.user_attrs.get(key)
        if before is None:
            study.set_user_attr(key, value)
        elif before != value:
            raise MinbertError(f"study {study.study_name}: its trials {ran.format(spell(before))}, not "
                               f"{spell(value)}: the same to continue the study, or a new --study")


def duplicate_of(study, trial, values):
    """The number of an earlier trial with the same flags that completed or is running, or None."""
    S = optuna.trial.TrialState
    for t in study.get_trials(deepcopy=False, states=(S.COMPLETE, S.RUNNING, S.PRUNED)):
        if t.number < trial.number and t.params == trial.params and "duplicate_of" not in t.user_attrs:
            return t.number
    return None


def running_elsewhere(study):
    """Trials other workers are running now (queued ones are for whichever worker asks next)."""
    return len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.RUNNING,)))


def fail_unstarted(study, since):
    """Fail, marked as stopped by Ctrl-C, the trials this worker asked for (numbered `since` on) that a Ctrl-C
    caught while Optuna set them up, before the objective named their worker: left RUNNING, every later start
    would count them as another worker's, and the study would never reach --trials. A trial another worker
    is setting up at that instant is told apart by its worker, once named; an unnamed one is ours to fail."""
    S = optuna.trial.TrialState
    for t in study.get_trials(deepcopy=False, states=(S.RUNNING,)):
        if t.number >= since and t.user_attrs.get("worker", WORKER) == WORKER and not t.params:
            try:
                study._storage.set_trial_user_attr(t._trial_id, "worker", WORKER)
                study._storage.set_trial_user_attr(t._trial_id, "interrupted", True)
                study._storage.set_trial_state_values(t._trial_id, state=S.FAIL)
            except optuna.exceptions.UpdateFinishedTrialError:
                pass


def requeue_interrupted(study):
    """Queue again the trial Ctrl-C stopped (Optuna marked it failed), with the same flags; returns how many
    were queued."""
    retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=3)
    trials = study.get_trials(deepcopy=False)
    retried = {n for t in trials for n in t.system_attrs.get("retry_history", [])}
    stopped = [t for t in trials if t.state == optuna.trial.TrialState.FAIL and t.user_attrs.get("interrupted")
               and t.user_attrs.get("worker") == WORKER and t.number not in retried]
    for t in stopped:
        retry(study, t)
    return len(stopped)
