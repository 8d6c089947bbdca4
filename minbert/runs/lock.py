"""One process per run folder: the lock a run holds on its folder's `.minbert-run` for as long as it writes
there (flock, released by the kernel when the process ends, so a killed run leaves no stale lock; where the
file system has no flock, the process id written in the file is checked instead), and what the file says:
which pipeline's run the folder holds, which process holds it now, the flags that define each of its models
and what a finished run wrote (folders.py). It is a JSON object, so that reading a run (report.py) needs no
torch: the first one in the file (a run stopped while rewriting it leaves the old record's tail after the new
one: RunLock._write)."""
import errno
import json
import os
import socket
import sys
import time
from pathlib import Path

from minbert.cli import MinbertError, process_alive
from minbert.files import special_file
from minbert.project_paths import RUN_MARK

SCRIPTS = {"classifier": "classifier.py", "multitask": "multitask_classifier.py", "pretrain": "pretrain.py",
           "ensemble": "ensemble.py", "eval": "multitask_classifier.py --eval_only",
           "gpt2-classifier": "gpt2/classifier.py", "gpt2-paraphrase": "gpt2/paraphrase_detection.py",
           "gpt2-sonnet": "gpt2/sonnet_generation.py"}


def a_run_of(pipeline):
    """'a classifier.py run', 'an ensemble.py run': a pipeline's run named in a message."""
    script = SCRIPTS.get(pipeline, pipeline)
    return f"{'an' if script[:1] in 'aeiou' else 'a'} {script} run"


def holder(fd):
    """What the lock file says about the process that holds (or last held) it."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 1 << 20).decode().strip() or "{}"
        # The first JSON object: a run stopped between writing a new record and cutting the file to its length
        # leaves the tail of the old one after it (_write).
        info, _ = json.JSONDecoder().raw_decode(text)
        return info if isinstance(info, dict) else {}
    except (OSError, ValueError):
        return {}


def read_mark(folder):
    """What `folder`'s mark says ({} where it has none, or one that is not the JSON a run writes)."""
    try:
        fd = os.open(Path(folder) / RUN_MARK, os.O_RDONLY)
    except OSError:
        return {}
    try:
        return holder(fd)
    finally:
        os.close(fd)


def still_running(folder):
    """'process PID since TIME' when `folder`'s mark names a process that holds it now (a run still training),
    else ''. The record, not the lock, is read: trying the lock, even for an instant, could refuse a run
    starting at that instant."""
    info = read_mark(folder)
    if not _alive(info):
        return ""
    where = f" on {info.get('host')}" if info.get("host") != socket.gethostname() else ""
    return f"process {info['pid']}{where} since {info.get('since')}"


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
        return not _alive(holder(fd))


class RunLock:
    """The lock a run holds on its folder's `.minbert-run` for as long as it writes there."""

    def __init__(self, folder):
        self.path, self.fd, self.pipeline, self.claimed = Path(folder) / RUN_MARK, None, None, False

    def acquire(self, flag, pipeline, named=None):
        """Hold the lock for a `pipeline` ('classifier', 'multitask', 'pretrain', 'ensemble') run, refusing a
        folder another process holds or one a run of another pipeline wrote. Messages name the folder as
        `named` (how the user gave it, e.g. '--run_name NAME (runs/NAME)'; default '`flag` FOLDER')."""
        named = named or f"{flag} {self.path.parent}"
        if self.path.exists() and not self.path.is_file() or self.path.is_symlink():  # the run's record goes there
            what = special_file(self.path) or ("a link" if self.path.is_symlink() else "a folder")
            raise MinbertError(f"{named}: its {RUN_MARK} is {what}, where the run keeps its record; a run's own "
                               "is a file: move it, or pick another folder")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _try_lock(fd):
            info = holder(fd)
            os.close(fd)
            who = (f"process {info.get('pid')} on {info.get('host')}, since {info.get('since')}: "
                   f"{str(info.get('command', ''))[:160]}") if info else "another process"
            raise MinbertError(f"{named}: in use by another run ({who}); two processes "
                               "writing one run folder would mix their checkpoints "
                               "and logs: wait for it to end, or pick another name")
        self.fd = fd
        before = holder(fd).get("pipeline")
        if before and before != pipeline:
            self.release()
            raise MinbertError(f"{named}: the run folder of {a_run_of(before)}; "
                               f"{a_run_of(pipeline)} writes into a folder of its own: pick another")
        self.pipeline = pipeline
        return self

    def claim(self):
        """Write who holds the lock into the file (once the run's other checks have passed, so that a refused
        run leaves the folder byte for byte as it was), keeping the record of the models' flags and of the
        outputs written so far."""
        before = holder(self.fd)
        self._write({"pipeline": self.pipeline, "pid": os.getpid(), "host": socket.gethostname(),
                     "since": time.strftime("%Y-%m-%d %H:%M:%S"),
                     "command": " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])}
                    | {k: before[k] for k in ("flags", "outputs") if isinstance(before.get(k), dict)})
        self.claimed = True
        return self

    def note(self, key, value):
        """Add {key: value} to what the file says, keeping the rest."""
        self._write({**holder(self.fd), key: value})

    def _write(self, info):
        # In place (the lock is on this file, so it cannot be replaced by a new one) and in this order: the
        # whole record in one write over the old one, then the file cut to its length. Truncating first would
        # leave an empty file to a run stopped (Ctrl-C, a kill) between the two calls; this order leaves the
        # new record followed by the old one's tail, and holder() reads the first object.
        data = (json.dumps(info) + "\n").encode()
        os.lseek(self.fd, 0, os.SEEK_SET)
        if os.write(self.fd, data) != len(data):  # a full disk: the old record's tail stays, never cut into
            raise OSError(errno.ENOSPC, f"{self.path}: the run's record was written in part")
        os.ftruncate(self.fd, len(data))

    def release(self):
        if self.fd is None:
            return
        if self.claimed:
            try:
                self._write({**holder(self.fd), "pid": None, "ended": time.strftime("%Y-%m-%d %H:%M:%S")})
            except OSError:
                pass
        os.close(self.fd)  # closing the file releases the lock
        self.fd, self.claimed = None, False
