"""Files on disk: written whole or not at all, read as what they are (loading tensors: safe_load.py).

  - `atomic_write` and `append_jsonl`: a write Ctrl-C cannot cut in half (deferred_interrupt), and a failed
    write (a full disk) that is one line naming the file and the command that continues the run;
  - digests (sha256, git blob ids), `read_text` (a text file, or one line saying it is not one), `text_lines`
    (its lines, broken where a CSV file breaks them and nowhere else);
  - `plain`: a value as what a checkpoint or a JSON log can hold.
"""
import contextlib
import errno
import hashlib
import json
import os
import re
import secrets
import signal
import sys
import threading
from pathlib import Path, PurePath

import numpy as np

from minbert.cli import MinbertError, interrupt_retry

_DEFER = {"depth": 0, "caught": False, "terminated": False}


@contextlib.contextmanager
def deferred_interrupt():
    """Ctrl-C (SIGINT) waits until the block ends: a file being written is completed, then the
    KeyboardInterrupt is raised. Without this, an interrupt inside torch.save leaves torch's zip writer
    half-closed, and the traceback of its second error replaces the one-line message. SIGTERM (`kill PID`, a
    batch system stopping a job) waits the same way and then takes its usual course. Nested blocks defer to
    the outermost. Signal handlers can be set from the main thread only; elsewhere this does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if _DEFER["depth"]:
        _DEFER["depth"] += 1
        try:
            yield
        finally:
            _DEFER["depth"] -= 1
        return
    previous = signal.signal(signal.SIGINT, lambda signum, frame: _DEFER.update(caught=True))
    previous_term = signal.signal(signal.SIGTERM, lambda signum, frame: _DEFER.update(terminated=True))
    _DEFER.update(depth=1, caught=False, terminated=False)
    try:
        yield
    finally:
        _DEFER["depth"] = 0
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous_term is None else previous_term)
        if _DEFER["terminated"]:
            _DEFER["terminated"] = False
            os.kill(os.getpid(), signal.SIGTERM)  # now, with the handler the process had
        if _DEFER["caught"]:
            _DEFER["caught"] = False
            raise KeyboardInterrupt


WHY = {errno.ENOSPC: "no space left on the device", errno.EDQUOT: "the disk quota is used up",
        errno.EFBIG: "the file would exceed the size limit", errno.EACCES: "permission denied",
        errno.EPERM: "not permitted (an "
                     "immutable file or folder?)", errno.EROFS: "the file system is read-only"}


def write_error(path, e):
    """One line for an OSError met while writing `path` (a full disk, a file-size limit, no permission)."""
    why = WHY.get(getattr(e, "errno", None), e.strerror or str(e))
    retry = interrupt_retry()
    retry = f"then run {retry}" if retry else "run the same command again"
    denied = getattr(e, "errno", None) in (errno.EACCES, errno.EPERM, errno.EROFS)
    fix = "make its folder writable (or name another)" if denied else "make room"
    return MinbertError(f"{path}: cannot write it: {why}; the file there before (if any) is unchanged and no "
                        f"partial file is left; {fix} and {retry}")


def interrupt_pending():
    """Whether a Ctrl-C arrived inside the deferred_interrupt block now running (raised when it ends)."""
    return _DEFER["caught"]


# fresh_sibling's names (.NAME.RANDOM.tmp; .publish: earlier versions' staged files): a process killed while
# writing one leaves it behind, and the next command writing into that folder removes it.
TEMPORARY = re.compile(r"^\..+\.[0-9a-f]{8}\.(tmp|publish)$")


def remove_temporaries(folder):
    """Remove the temporary files a killed process left in `folder`, while this process holds the folder (its
    run lock, or publishing's lock): a file of that name is then no other process's work in progress."""
    for p in Path(folder).iterdir() if Path(folder).is_dir() else ():
        if TEMPORARY.match(p.name) and p.is_file() and not p.is_symlink():
            p.unlink(missing_ok=True)


def fresh_sibling(path, suffix):
    """A new empty file beside `path`, hidden and named after it (.NAME.RANDOM`suffix`), created only
    if no file has that name, so a temporary file never replaces one that is there (a user's
    NAME.tmp). Returns (its path, an open descriptor); the file's mode is an ordinary file's (the
    umask's), not mkstemp's owner-only 0600."""
    path = Path(path)
    while True:
        tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}{suffix}")
        try:
            return tmp, os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue


def write_beside(path, write_fn, mode="wb", suffix=".tmp"):
    """Write a new file beside `path` (fresh_sibling) through `write_fn(fp)`, flushed to the disk, and
    return its path; `path` itself is not touched. Ctrl-C waits for the write to finish, then removes
    the new file (unless an outer deferred_interrupt block holds it back); a failed write removes it too
    and is one line (write_error)."""
    path, tmp = Path(path), None
    try:
        with deferred_interrupt():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp, fd = fresh_sibling(path, suffix)
            with os.fdopen(fd, mode, **({} if "b" in mode else {"encoding": "utf-8", "newline": ""})) as fp:
                write_fn(fp)
                fp.flush()
                os.fsync(fp.fileno())
    except BaseException as e:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        cause = e if isinstance(e, OSError) else e.__context__ if isinstance(e.__context__, OSError) else None
        if cause is not None:  # torch.save re-raises a failed write as a RuntimeError of its own
            raise write_error(path, cause) from None
        raise
    return tmp


def writable_problem(folder):
    """Why no file can be made in `folder` (or, when it does not exist yet, in the nearest folder above it,
    where it would be made), or None. Tried, not read from the mode bits or os.access: root writes into a
    folder of mode 555, while an immutable folder or a read-only file system refuses root too, which os.access
    does not always know. The trial file is hidden, new (fresh_sibling) and removed at once."""
    where = Path(os.path.abspath(folder))
    while not where.exists() and where != where.parent:
        where = where.parent
    if not where.is_dir():
        return None  # a file in the way: the output checks say so in their own words
    try:
        tmp, fd = fresh_sibling(where / "write-check", ".tmp")
        os.close(fd)
        tmp.unlink(missing_ok=True)  # (removed already if a publishing process tidied the folder meanwhile)
    except OSError as e:
        return f"cannot write in {where}: {WHY.get(e.errno, e.strerror or str(e))}"
    return None


def check_writable(folder, where):
    """One line, before any work, when nothing can be written in `folder` (`where`: its flag and path)."""
    problem = writable_problem(folder)
    if problem:
        raise MinbertError(f"{where}: {problem}; make it writable, or name a folder that is")


def atomic_write(path, write_fn, mode="wb"):
    """Write through a temporary sibling and rename, so an interrupted run never leaves half a file: Ctrl-C
    waits for the write to finish (deferred_interrupt), and a failed write (a full disk) removes the
    temporary file and is one line naming the file."""
    path = Path(path)
    with deferred_interrupt():
        tmp = write_beside(path, write_fn, mode)
        try:
            os.replace(tmp, path)
        except BaseException as e:
            tmp.unlink(missing_ok=True)
            if isinstance(e, OSError):
                raise write_error(path, e) from None
            raise
    return path


def append_jsonl(path, record):
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with deferred_interrupt(), open(path, "a") as fp:
            fp.write(json.dumps(record) + "\n")
    except OSError as e:
        raise write_error(path, e) from None


def require_file(path, where, what, hint=""):
    """One line unless `path` is a file: a folder (or a device, a pipe) given where a file goes is
    said to be one (it exists, so "not found" would mislead); `where` names the path (with its flag),
    `hint` follows a missing file."""
    path = Path(path)
    if path.is_dir():
        raise MinbertError(f"{where}: is a folder; give the {what} itself")
    if not path.is_file() and (kind := special_file(path)):
        raise MinbertError(f"{where}: is {kind}, not a regular file; give the {what} itself")
    if not path.is_file():
        raise MinbertError(f"{where}: {what} not found" + (f" ({hint})" if hint else ""))


def first_repeated(paths):
    """The first of `paths` that names a file or folder given before it (a.pt and ./a.pt are one), or None."""
    seen = set()
    for p in paths:
        key = Path(p).resolve()
        if key in seen:
            return p
        seen.add(key)
    return None


def special_file(path):
    """What `path` is when it exists but is neither a regular file nor a folder (/dev/null is a character
    device, a named pipe would block a reader for ever), or None."""
    path = Path(path)
    for test, kind in ((path.is_char_device, "a character device"), (path.is_block_device, "a block device"),
                       (path.is_fifo, "a named pipe"), (path.is_socket, "a socket")):
        if test():
            return kind
    return "a broken link (its target is missing)" if path.is_symlink() and not path.exists() else None


def what_is_there(path):
    """How a message names what is at `path` where something else goes: a link (to a missing folder, or to a file
    or a folder, named), a device or a pipe (special_file), a folder or a file."""
    path = Path(path)
    if path.is_symlink():
        return ("a link to a missing folder" if not path.exists() else
                f"a link to {'a folder' if path.is_dir() else 'a file'} ({path.resolve()})")
    return special_file(path) or ("a folder" if path.is_dir() else "a file")


def read_text(path, what):
    """A text file's contents (a byte-order mark, Excel's "CSV UTF-8", is no text: dropped); one line when it is a
    folder, cannot be read (no permission), binary (it holds a NUL byte), or text with a byte that is not UTF-8
    (a file saved as Latin-1, say: the line and the byte named). Every reader of a text file the user gives
    comes through here."""
    try:
        raw = Path(path).read_bytes()
    except IsADirectoryError:
        raise MinbertError(f"{path}: is a folder, not a {what}") from None
    except FileNotFoundError:
        raise MinbertError(f"{path}: {what} not found") from None
    except OSError as e:
        why = WHY.get(e.errno, e.strerror or str(e))
        raise MinbertError(f"{path}: cannot read the {what}: {why}") from None
    if b"\x00" in raw:  # valid UTF-8, but no text: a NUL would pass into a sentence unseen
        line = raw[:raw.index(b"\x00")].count(b"\n") + 1
        raise MinbertError(f"{path}: not a text file, so not a {what} (a NUL byte on line {line})")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise MinbertError(f"{path}: line {line}: byte 0x{raw[e.start]:02X} is not UTF-8 text (save the {what} as "
                           "UTF-8)") from None


def text_lines(text):
    """The lines of a file's text, split at '\\n' (a '\\r' before it dropped) and nowhere else. str.splitlines
    also breaks at \\v, \\f, \\x1c-\\x1e, \\x85, U+2028 and U+2029, which a sentence may hold and a CSV file
    does not end a row at: split there, a row loses its fields and the error blames the wrong line."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline that ends the last line starts no new one
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def file_digest(path):
    """The sha256 of a file's bytes (hex)."""
    with open(path, "rb") as fp:
        return hashlib.file_digest(fp, "sha256").hexdigest()


def git_blob_id(path):
    """The id `git hash-object` prints: sha1 over 'blob <size>\\0' + content."""
    data = Path(path).read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def plain(value):
    """`value` as plain data (what weights_only loading accepts and a JSON log can hold): paths become
    strings, tuples and sets lists, numpy scalars Python numbers."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = [plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, (set, frozenset)) else items
    if isinstance(value, PurePath):
        return str(value)
    if isinstance(value, np.generic):
        return value.item()
    # a tensor (a checkpoint's weights) is kept as it is; one exists only where torch is imported, and this module
    # imports no torch, so that a command reading runs (report.py) starts without it
    torch = sys.modules.get("torch")
    if value is None or isinstance(value, (str, int, float, bool)) or (torch is not None and torch.is_tensor(value)):
        return value
    raise TypeError(f"{type(value).__name__} is not plain data and cannot go into a checkpoint")
