"""Run folders: no run destroys another's results, nor a file the user had.

Every training run writes its checkpoints, per-epoch log and prediction files into a folder of its own,
`runs/NAME/` (NAME: `--run_name`, by default the script and a timestamp; `--run_dir DIR` anywhere). The
folder is the run's alone:
  - `.minbert-run` in it marks it as a run folder, and the process writing into it holds a lock on that file
    (flock, released by the kernel when the process ends, so a killed run leaves no stale lock; where the
    file system has no flock, the process id written in the file is checked instead). A second process
    asking for the folder is refused in one line naming the first.
  - A folder holding files that no run wrote is refused (`--run_dir data` would mix run files among the CSVs);
    `--run_name` stays under runs/.
  - No output path may name an input of the run, name the same file as another output, or lie inside
    another run's folder (whose files belong to that run's checkpoint and log).
The handout's paths (`predictions/*.csv`, what `prepare_submit.py` zips) then get a copy of the files of the
run just finished, and one line says which run's files they replaced; those stay in that run's folder.
`predictions/.sources.json` remembers which run wrote each published file and its sha256: a file there that
no run wrote, or that changed since, is never replaced without being kept as a dated backup, said in one line.
"""
import csv
import hashlib
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path, PurePath

from utils import MinbertError, atomic_write, is_main, process_alive

RUNS_ROOT = Path("runs")
SOURCES = ".sources.json"
RUN_MARK = ".minbert-run"
SCRIPTS = {"classifier": "classifier.py", "multitask": "multitask_classifier.py", "pretrain": "pretrain.py",
           "ensemble": "ensemble.py"}


def new_run_name(prefix):
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_run_name(name, flag="--run_name", root=RUNS_ROOT):
    """`name` as a folder under `root`: relative, no '..', not empty. Returns it."""
    pure = PurePath(name)
    if not name.strip() or pure.is_absolute() or not pure.parts or ".." in pure.parts or name != name.strip():
        raise MinbertError(f"{flag} {name!r}: names a folder under {root}/ (e.g. {flag} my-run, or exp/run-1), never "
                           f"one outside it" + ("; for a folder elsewhere give --run_dir DIR" if flag == "--run_name" else ""))
    return name


@dataclass
class RunFiles:
    """One trained model's files in a run folder: best and last checkpoints and the per-epoch log."""
    folder: Path
    stem: str

    @property
    def best(self):
        return self.folder / f"{self.stem}.pt"

    @property
    def last(self):
        return self.folder / f"{self.stem}-last.pt"

    @property
    def log(self):
        return self.folder / f"{self.stem}-log.jsonl"

    def exist(self):
        return [p for p in (self.log, self.best, self.last) if p.exists()]


# ----------------------------------------------------------------------------- one process per run folder

def _holder(fd):
    """What the lock file says about the process that holds (or last held) it."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        info = json.loads(os.read(fd, 1 << 16).decode() or "{}")
        return info if isinstance(info, dict) else {}
    except (OSError, ValueError):
        return {}


def _alive(info):
    """Whether the process named in a lock file may still be running: a dead process on this machine is
    recognised; one on another machine cannot be checked from here, so it counts as running."""
    pid, host = info.get("pid"), info.get("host")
    if not isinstance(pid, int):
        return False
    return host != socket.gethostname() or process_alive(pid)


def _try_lock(fd):
    """True when this process now holds the lock on `fd`, False when another process does."""
    try:
        import fcntl
    except ImportError:  # Windows: a byte-range lock on the file's first byte
        import msvcrt
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError:  # a file system without flock (some network mounts): the process id written in the file
        return not _alive(_holder(fd))


class RunLock:
    """The lock a run holds on its folder's `.minbert-run` for as long as it writes there."""

    def __init__(self, folder):
        self.path, self.fd, self.pipeline, self.claimed = Path(folder) / RUN_MARK, None, None, False

    def acquire(self, flag, pipeline):
        """Hold the lock for a `pipeline` ('classifier', 'multitask', 'pretrain', 'ensemble') run, refusing a
        folder another process holds or one a run of another pipeline wrote."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _try_lock(fd):
            info = _holder(fd)
            os.close(fd)
            who = (f"process {info.get('pid')} on {info.get('host')}, since {info.get('since')}: "
                   f"{str(info.get('command', ''))[:160]}") if info else "another process"
            raise MinbertError(f"{flag} {self.path.parent}: in use by another run ({who}); two processes writing one "
                               f"run folder would mix their checkpoints and logs: wait for it to end, or pick another name")
        self.fd = fd
        before = _holder(fd).get("pipeline")
        if before and before != pipeline:
            self.release()
            raise MinbertError(f"{flag} {self.path.parent}: the run folder of a {SCRIPTS.get(before, before)} run; a "
                               f"{SCRIPTS.get(pipeline, pipeline)} run writes into a folder of its own: pick another")
        self.pipeline = pipeline
        return self

    def claim(self):
        """Write who holds the lock into the file (once the run's other checks have passed, so that a refused
        run leaves the folder byte for byte as it was)."""
        self._write({"pipeline": self.pipeline, "pid": os.getpid(), "host": socket.gethostname(),
                     "since": time.strftime("%Y-%m-%d %H:%M:%S"), "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])})
        self.claimed = True
        return self

    def _write(self, info):
        os.ftruncate(self.fd, 0)
        os.lseek(self.fd, 0, os.SEEK_SET)
        os.write(self.fd, (json.dumps(info) + "\n").encode())

    def release(self):
        if self.fd is None:
            return
        if self.claimed:
            try:
                self._write({**_holder(self.fd), "pid": None, "ended": time.strftime("%Y-%m-%d %H:%M:%S")})
            except OSError:
                pass
        os.close(self.fd)  # closing the file releases the lock
        self.fd, self.claimed = None, False


def is_run_folder(folder):
    """A folder a run wrote: marked, or (an earlier minbert's, before the mark) holding a run's log."""
    folder = Path(folder)
    return (folder / RUN_MARK).is_file() or any(folder.glob("*-log.jsonl"))


def run_folder_of(path):
    """The run folder `path` lies in (or is), or None."""
    path = Path(os.path.abspath(path))
    for p in (path, *path.parents):
        if (p / RUN_MARK).is_file():
            return p
    return None


@dataclass
class Run:
    """A run's name and folder, and its lock on that folder (released by `close`, or by leaving a `with`
    block); `files(stem)` names what one trained model writes there. `how` is the flag that names it again
    (for the --resume hint)."""
    name: str
    folder: Path
    how: str = ""
    lock: RunLock = None
    created: Path = None  # the outermost folder opening the run made (removed again if nothing was written)

    def files(self, stem):
        return RunFiles(self.folder, stem)

    def close(self):
        if self.lock is not None:
            self.lock.release()
            self.lock = None
            # folders this run made and left with nothing but its mark (it stopped before writing anything)
            if self.created is not None and [p.name for p in self.folder.iterdir()] == [RUN_MARK]:
                (self.folder / RUN_MARK).unlink()
                for folder in (self.folder, *self.folder.parents):
                    if any(folder.iterdir()):
                        break
                    folder.rmdir()
                    if folder == self.created:
                        break

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_run(prefix, stems, run_name="", run_dir=None, resume=False, root=RUNS_ROOT, flag=None):
    """The run folder a run writes into, locked for this process; refused in one line when it is another
    process's, not a run folder, or (unless the run resumes it) already holds this pipeline's files.

    --run_dir DIR is that folder; otherwise runs/RUN_NAME (a new timestamped name by default). A folder
    already holding this pipeline's files (one of `stems`' log or checkpoints; any file when `stems` is
    None) is refused unless the run resumes it. --resume without a name takes the newest folder under `root`
    holding one of `stems`' runs. Under torchrun rank 0 alone holds the lock. Use the result in a `with`
    block (or call its close()), so that the lock is released when the run ends. `flag` names the folder's
    flag in messages (default --run_dir or --run_name)."""
    flag = flag or ("--run_dir" if run_dir else "--run_name")
    if run_dir:
        folder = Path(run_dir)
    elif run_name:
        folder = Path(root) / check_run_name(run_name)
    elif resume:
        found = sorted((d for d in Path(root).glob("*") if d.is_dir() and any(RunFiles(d, s).exist() for s in stems or ())),
                       key=lambda d: d.stat().st_mtime)
        if not found:
            raise MinbertError(f"--resume: no {prefix} run to resume in {root}/ (give --run_name NAME or --run_dir DIR)")
        folder = found[-1]
    else:
        name, n = new_run_name(prefix), 2
        while (Path(root) / name).exists():  # two runs started in the same second
            name, n = f"{new_run_name(prefix)}-{n}", n + 1
        folder = Path(root) / name
    if folder.exists() and not folder.is_dir():
        raise MinbertError(f"{flag} {folder}: is a file, but a run folder goes there; move it or pick another name")
    if folder.is_dir() and any(folder.iterdir()) and not is_run_folder(folder):
        example = sorted(p.name for p in folder.iterdir())[0]
        raise MinbertError(f"{flag} {folder}: not a run folder: it holds files no run wrote ({example}, ...), which "
                           f"the run's files would mix with or replace; give a new or empty folder")
    run = Run(run_name or folder.name, folder, f"{flag} {folder}" if run_dir else f"--run_name {folder.name}",
              created=next((p for p in reversed([folder, *folder.parents]) if not p.exists()), None))
    if is_main():
        run.lock = RunLock(folder).acquire(flag, prefix)
    try:
        held = ([p for s in stems for p in RunFiles(folder, s).exist()] if stems is not None
                else sorted(p for p in folder.iterdir() if p.name != RUN_MARK) if folder.is_dir() else [])
        if held and not resume:
            raise MinbertError(f"{flag} {folder}: already holds a run ({held[0].name}); choose another"
                               + (", or add --resume to continue it" if stems is not None else ""))
    except BaseException:
        run.close()
        raise
    if run.lock is not None:
        run.lock.claim()
    return run


# ----------------------------------------------------------------------------- outputs and inputs

def append_row(path, fields, row):
    """Append `row` to the CSV table at `path` (its header first if the file is new)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    with open(path, "a", newline="") as fp:
        w = csv.DictWriter(fp, fields)
        if new:
            w.writeheader()
        w.writerow(row)


def _named(items):
    """[(flag, path)] from a list of paths or (flag, path) pairs."""
    return [(None, Path(i)) if not isinstance(i, tuple) else (i[0], Path(i[1])) for i in items]


def same_file(a, b):
    """Whether two paths name one file (a link or another spelling counts as the same)."""
    a, b = Path(a), Path(b)
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return Path(os.path.abspath(a)) == Path(os.path.abspath(b))


def check_outputs(dirs=(), files=(), inputs=(), own=None):
    """Fail before training, not after it, when an output cannot or must not be written:
      - a folder that is a file, a file that is a folder, or a parent that is a file;
      - two outputs naming one file;
      - an output that is one of the run's `inputs` ([(what, path)]: data files, a checkpoint it reads);
      - an output inside another run's folder (a folder holding `.minbert-run` other than `own`, this run's).
    `dirs` and `files` are paths or (flag, path) pairs; the flag names the output in the message."""
    own = Path(os.path.abspath(own)) if own is not None else None
    seen = []
    for (flag, path), want_dir in [(d, True) for d in _named(dirs)] + [(f, False) for f in _named(files)]:
        name = f"{flag} {path}" if flag else str(path)
        if path.exists() and path.is_dir() != want_dir:
            raise MinbertError(f"{name}: is a {'file' if want_dir else 'folder'}, but the run writes a "
                               f"{'folder' if want_dir else 'file'} there; move it or pick another path")
        for parent in path.parents:
            if parent.exists() and not parent.is_dir():
                raise MinbertError(f"{parent}: is a file, but the run writes {path} inside it; "
                                   f"move it or pick another path")
        if want_dir:
            continue
        for what, other in inputs:
            if same_file(path, other):
                raise MinbertError(f"{name}: is {what}, which this run reads; writing there would destroy it: "
                                   f"name another file")
        for other_name, other in seen:
            if same_file(path, other):
                raise MinbertError(f"{name}: {other_name} names the same file; each output needs its own")
        seen.append((name, path))
        folder = run_folder_of(path.parent)
        if folder is not None and folder != own:
            raise MinbertError(f"{name}: inside {folder}, the folder of another run, whose files belong to its "
                               f"checkpoint and log: name a path outside it")


def check_table(path, fields, flag):
    """A table rows are appended to (--results): refused in one line when the file there is another table."""
    path = Path(path)
    if path.is_file() and path.stat().st_size:
        with open(path, encoding="utf-8", errors="replace", newline="") as fp:
            first = fp.readline().strip()
        if first.lstrip("\ufeff") != ",".join(fields):
            raise MinbertError(f"{flag} {path}: not a results table of this script (its first line is {first[:60]!r}), so "
                               f"rows appended to it would garble it: name another file")


def _sha256(data):
    return hashlib.sha256(data).hexdigest()


def _backup_name(dest):
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup, n = dest.with_name(f"{dest.name}.{stamp}.bak"), 2
    while backup.exists():
        backup, n = dest.with_name(f"{dest.name}.{stamp}-{n}.bak"), n + 1
    return backup


def written_by(dest):
    """The record of the run that wrote the file at `dest` (from its folder's .sources.json), or None when no run
    did or the file changed since."""
    rec = _read_sources(Path(dest).parent / SOURCES).get(Path(dest).name)
    if not isinstance(rec, dict):
        return None
    if "sha256" in rec and Path(dest).is_file() and _sha256(Path(dest).read_bytes()) != rec["sha256"]:
        return None
    return rec


def protect(dests):
    """Before `dests` are written: each one that exists and that no run wrote (or that changed since) is
    renamed to a dated backup beside it (NAME.YYYYmmdd-HHMMSS.bak). Returns [(dest, backup)]."""
    kept = []
    for dest in map(Path, dests):
        if dest.is_file() and written_by(dest) is None:
            backup = _backup_name(dest)
            os.replace(dest, backup)
            kept.append((dest, backup))
    return kept


def backup_line(kept):
    """The one line saying which files were kept as backups (empty when none)."""
    if not kept:
        return ""
    return ("kept files that no run wrote (or that changed since) as dated backups: "
            + ", ".join(f"{d} -> {b.name}" for d, b in kept))


def record(dests, run_name, run_dir):
    """Note in each destination folder's .sources.json which run wrote `dests`, with their sha256."""
    by_folder = {}
    for dest in map(Path, dests):
        by_folder.setdefault(dest.parent, []).append(dest)
    for folder, files in by_folder.items():
        sources = _read_sources(folder / SOURCES)
        for dest in files:
            sources[dest.name] = {"run": run_name, "dir": str(run_dir), "sha256": _sha256(dest.read_bytes())}
        atomic_write(folder / SOURCES, lambda fp: json.dump(sources, fp, indent=1, sort_keys=True), mode="w")


def publish(pairs, run_name, run_dir, log=print, what="predictions"):
    """Copy each (run file, published path) pair. The line it prints names the run whose published files
    were replaced and the folder where they still are; a file there that no run wrote is kept as a backup."""
    replaced, copies, dests, published = set(), [], [], []
    for src, dest in pairs:
        src, dest = Path(src), Path(dest)
        dests.append(dest)
        if same_file(src, dest):  # published where the run wrote it: nothing to copy
            continue
        published.append(dest)
        data = src.read_bytes()
        if dest.is_file() and dest.read_bytes() == data:
            continue
        old = written_by(dest) if dest.is_file() else None
        if old is not None:
            replaced.add(f"run {old['run']} (still in {old['dir']})")
        copies.append((dest, data))
    kept = protect([d for d, _ in copies])
    for dest, data in copies:
        atomic_write(dest, lambda fp: fp.write(data))
    if not dests:
        return ""
    if published:
        record(published, run_name, run_dir)
    line = f"run {run_name}'s {what} copied to " + ", ".join(str(d) for d in dests)
    if replaced:
        line += f", replacing those of {'; '.join(sorted(replaced))}"
    log(line)
    if kept:
        log(backup_line(kept))
    return line


def _read_sources(path):
    try:
        data = json.loads(Path(path).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


# ----------------------------------------------------------------------------- reading a run's log

# The pipelines whose epoch logs share the one schema (trainer.fit writes them).
PIPELINES = ("classifier", "multitask", "pretrain")


def _legacy(rec):
    """A record of the earlier per-pipeline log formats, in the current schema."""
    if "dev_mean" in rec:
        return {**rec, "pipeline": "multitask", "dev_score": rec["dev_mean"]}
    if "dev_acc" in rec:
        return {**rec, "pipeline": "classifier", "dev_score": rec["dev_acc"],
                "dev": {"accuracy": rec["dev_acc"], "f1": rec.get("dev_f1"), "train_accuracy": rec.get("train_acc")}}
    if "masked_acc" in rec:
        return {**rec, "pipeline": "pretrain", "dev_score": rec["masked_acc"],
                "dev": {k: rec[k] for k in ("masked_acc", "masked_loss") if k in rec}}
    return rec


def read_text(path, what):
    try:
        return Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise MinbertError(f"{path}: not a text file, so not a {what}") from None
    except IsADirectoryError:
        raise MinbertError(f"{path}: is a folder, not a {what}") from None


def read_log(path):
    path = Path(path)
    if not path.is_file():
        raise MinbertError(f"{path}: log not found")
    records, stopped = [], None
    for n, line in enumerate(read_text(path, "run log").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            raise MinbertError(f"{path}: line {n}: truncated or not JSON; the run was probably cut off while "
                               f"writing it: delete that line and report again") from None
        if isinstance(rec, dict) and "stopped" in rec:
            stopped = rec["stopped"]  # the line saying why the run stopped early
            continue
        rec = _legacy(rec) if isinstance(rec, dict) else rec
        if not isinstance(rec, dict) or "epoch" not in rec or "dev_score" not in rec or rec.get("pipeline") not in PIPELINES:
            raise MinbertError(f"{path}: line {n}: not a per-epoch record of classifier.py, multitask_classifier.py "
                               f"or pretrain.py")
        records.append(rec)
    if not records:
        raise MinbertError(f"{path}: no epoch finished" + (f"; the run stopped: {stopped}" if stopped else
                                                           " (the log is empty)"))
    return records
