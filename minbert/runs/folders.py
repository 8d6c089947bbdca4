"""Run folders: every training run writes into a folder of its own, one process at a time.

Every training run writes its checkpoints, per-epoch log and prediction files into `runs/NAME/` (NAME:
`--run_name`, by default the script and a timestamp; `--run_dir DIR` anywhere). The folder is the run's alone:
  - `.minbert-run` in it marks it as a run folder, and the process writing into it holds a lock on that file
    (flock, released by the kernel when the process ends, so a killed run leaves no stale lock; where the
    file system has no flock, the process id written in the file is checked instead). A second process
    asking for the folder is refused in one line naming the first.
  - A folder holding files that no run wrote is refused (`--run_dir data` would mix run files among the CSVs);
    `--run_name` stays under runs/.
What a run may write outside its folder, and how it publishes its predictions: runs/outputs.py.
"""
import json
import os
import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path, PurePath

from minbert.files import check_writable
from minbert.runs.places import among_sources
from utils import MinbertError, is_main, process_alive

RUNS_ROOT = Path("runs")
RUN_MARK = ".minbert-run"
SCRIPTS = {"classifier": "classifier.py", "multitask": "multitask_classifier.py", "pretrain": "pretrain.py",
           "ensemble": "ensemble.py", "eval": "multitask_classifier.py --eval_only",
           "gpt2-classifier": "gpt2/classifier.py", "gpt2-paraphrase": "gpt2/paraphrase_detection.py",
           "gpt2-sonnet": "gpt2/sonnet_generation.py"}


def new_run_name(prefix):
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}"


def check_run_name(name, flag="--run_name", root=RUNS_ROOT):
    """`name` as a folder under `root`: relative, no '..', not empty. Returns it."""
    pure = PurePath(name)
    if not name.strip() or pure.is_absolute() or not pure.parts or ".." in pure.parts or name != name.strip():
        raise MinbertError(f"{flag} {name!r}: names a folder under {root}/ (e.g. {flag} my-run, or "
                           "exp/run-1), never one outside it"
                           + ("; for a folder elsewhere give --run_dir DIR" if flag == "--run_name" else ""))
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
            raise MinbertError(f"{flag} {self.path.parent}: in use by another run ({who}); two processes "
                               "writing one run folder would mix their checkpoints "
                               "and logs: wait for it to end, or pick another name")
        self.fd = fd
        before = _holder(fd).get("pipeline")
        if before and before != pipeline:
            self.release()
            raise MinbertError(f"{flag} {self.path.parent}: the run folder of a "
                               f"{SCRIPTS.get(before, before)} run; a {SCRIPTS.get(pipeline, pipeline)} run "
                               "writes into a folder of its own: pick another")
        self.pipeline = pipeline
        return self

    def claim(self):
        """Write who holds the lock into the file (once the run's other checks have passed, so that a refused
        run leaves the folder byte for byte as it was)."""
        self._write({"pipeline": self.pipeline, "pid": os.getpid(), "host": socket.gethostname(),
                     "since": time.strftime("%Y-%m-%d %H:%M:%S"),
                     "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])})
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


def check_run_place(folder, flag):
    """A run folder never lies inside another run's folder (whose files belong to that run), in
    a folder of published predictions (the leaderboard files prepare_submit.py zips), or among
    the project's code and data."""
    outer = run_folder_of(Path(folder).parent)
    if outer is not None:
        raise MinbertError(f"{flag} {folder}: inside {outer}, the folder of another run; a run folder never "
                           "nests in another: name a folder outside it")
    if "predictions" in Path(os.path.abspath(folder)).parts:
        raise MinbertError(f"{flag} {folder}: a folder of published predictions (the leaderboard files "
                           "prepare_submit.py zips), where a run's checkpoints do "
                           "not belong: name a folder outside it, e.g. under runs/")
    if among_sources(folder):
        raise MinbertError(f"{flag} {folder}: among the project's own files; a run folder inside the project "
                           "goes under runs/ or a folder of its own")


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
        found = sorted((d for d in Path(root).glob("*")
                        if d.is_dir() and any(RunFiles(d, s).exist() for s in stems or ())),
                       key=lambda d: d.stat().st_mtime)
        if not found:
            raise MinbertError(f"--resume: no {prefix} run to resume in "
                               f"{root}/ (give --run_name NAME or --run_dir DIR)")
        folder = found[-1]
    else:
        name, n = new_run_name(prefix), 2
        while (Path(root) / name).exists():  # two runs started in the same second
            name, n = f"{new_run_name(prefix)}-{n}", n + 1
        folder = Path(root) / name
    if folder.exists() and not folder.is_dir():
        raise MinbertError(f"{flag} {folder}: is a file, but a run folder "
                           "goes there; move it or pick another name")
    check_run_place(folder, flag)
    check_writable(folder, f"{flag} {folder}")
    if folder.is_dir() and any(folder.iterdir()) and not is_run_folder(folder):
        example = sorted(p.name for p in folder.iterdir())[0]
        raise MinbertError(f"{flag} {folder}: not a run folder: it holds files no run wrote ({example}, "
                           "...), which the run's files would mix "
                           "with or replace; give a new or empty folder")
    run = Run(run_name or folder.name, folder, f"{flag} {folder}" if run_dir else f"--run_name {folder.name}",
              created=next((p for p in reversed([folder, *folder.parents]) if not p.exists()), None))
    if is_main():
        run.lock = RunLock(folder).acquire(flag, prefix)
    try:
        held = ([p for s in stems for p in RunFiles(folder, s).exist()] if stems is not None
                else sorted(p for p in folder.iterdir() if p.name != RUN_MARK) if folder.is_dir() else [])
        if held and not resume:
            named = f"--run_name {run_name} ({folder})" if run_name and not run_dir else f"{flag} {folder}"
            raise MinbertError(f"{named}: already holds a run ({held[0].name}); choose another"
                               + (", or add --resume to continue it" if stems is not None else ""))
    except BaseException:
        run.close()
        raise
    if run.lock is not None:
        run.lock.claim()
    return run
