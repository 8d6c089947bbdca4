"""Where in the project a path lies, and the rule every command applies to a file before it writes it.

The project's code, docs and data folders are no command's output, nor is the project folder itself;
runs/folders.py keeps run folders out of them, and `check_output` keeps every written file out of them (the
course data in data/ excepted, where datasets.py --fetch puts it). An output is a regular file or nothing
(`output_problem`): a link, a device or a named pipe given as an output is one line, before any work. The
rest of the rule (inputs, other runs' folders, course data files, files the project did not write) is
runs/outputs.py's, which calls this."""
import os
from pathlib import Path

from minbert.cli import MinbertError
from minbert.files import WHY, check_writable, special_file

PROJECT = Path(__file__).resolve().parents[1]  # the project folder (where the scripts are)
RUN_MARK = ".minbert-run"  # the file that makes a folder a run's (runs/lock.py writes and locks it)
OUTPUT_FOLDERS = ("predictions", "runs", "checkpoints", "reports", "pretrained")
SOURCE_FOLDERS = (".git", ".ci", "minbert", "gpt2", "tests", "tools", "docs", "benchmarks", "data")
SUBPROJECTS = ("gpt2",)  # folders whose scripts run from inside them, with output folders of their own


def project_parts(parts):
    """A path's parts relative to the project folder, with gpt2/'s own output folders (gpt2/runs/, ...) seen
    as the project's (runs/, ...)."""
    if parts[:1] and parts[0] in SUBPROJECTS and parts[1:2] and parts[1] in OUTPUT_FOLDERS:
        return parts[1:]
    return parts


def _inside(path):
    """`path`'s project_parts, or None when it lies outside the project folder."""
    path = Path(path).resolve()
    return project_parts(path.relative_to(PROJECT).parts) if path.is_relative_to(PROJECT) else None


def among_sources(path, root=True, data=False):
    """Whether `path` lies in one of the project's code, docs or data folders (or, with `root`, is the
    project folder itself); with `data`, data/ does not count (the course files go there)."""
    parts = _inside(path)
    if parts is None:
        return False
    if not parts:
        return root
    return parts[0] in SOURCE_FOLDERS and not (data and parts[0] == "data")


def in_project(path):
    """Whether `path` lies in the project folder outside its output folders (a file of its code, docs or data)."""
    parts = _inside(path)
    return parts is not None and (not parts or parts[0] not in OUTPUT_FOLDERS)


def run_folder_of(path):
    """The run folder `path` lies in (or is), or None."""
    path = Path(os.path.abspath(path))
    for p in (path, *path.parents):
        if (p / RUN_MARK).is_file():
            return p
    return None


def output_folder(path):
    """The project's output folder (predictions, runs, ...) `path` lies in or is, or None."""
    parts = _inside(path)
    return parts[0] if parts and parts[0] in OUTPUT_FOLDERS else None


def output_problem(path, append=False):
    """Why no command may write the file `path`, or None. An output is a regular file or nothing: a link
    (even to a regular file: the write would land where the link points, or replace the link), a folder, a
    device, a named pipe or a socket is refused, whatever the folder allows. An existing file must be
    writable: an immutable or write-protected file, or one on a read-only file system, is tried with an open
    for writing (appending with `append`, as a results table is), which changes nothing in it."""
    path = Path(path)
    if path.is_symlink():
        target = os.readlink(path)
        return (f"is a link to {target}" + ("" if path.exists() else " (which does not exist)")
                + "; outputs are regular files only: name the file itself, or another path")
    if not path.exists():
        return None
    if path.is_dir():
        return "is a folder, where a file is written; move it or name another path"
    if kind := special_file(path):
        return f"is {kind}, not a regular file; outputs are regular files only: name another path"
    try:
        os.close(os.open(path, os.O_WRONLY | getattr(os, "O_NONBLOCK", 0) | (os.O_APPEND if append else 0)))
    except OSError as e:
        why = WHY.get(e.errno, e.strerror or str(e))
        return (f"cannot be {'appended to' if append else 'replaced'}: {why}; make it writable "
                "(chmod u+w, or chattr -i for an immutable file) or name another path")
    return None



def too_long(path):
    """One line when a part of `path` is longer than a file system takes (255 bytes), which every file
    operation on it would fail with."""
    long = next((p for p in Path(path).parts if len(p.encode()) > 255), None)
    if long is not None:
        raise MinbertError(f"{str(path)[:60]}...: a name of {len(long.encode())} bytes, longer than a file "
                           "system takes (255): pick a shorter one")


def check_output(path, name, append=False, data=False):
    """One line, before any work, when the file `path` (named `name` in the message: its flag and path) may
    not be written: it lies among the project's code, docs or data (with `data`, data/ is fine and the
    project folder itself is not: the course files), it is not a regular file (a link, a folder, a device,
    a named pipe), it exists and cannot be replaced (or, with `append`, appended to), a folder above it is
    a file, or nothing can be made in its folder."""
    path = Path(path)
    too_long(path)
    for parent in path.parents:
        if parent.exists() and not parent.is_dir():
            raise MinbertError(f"{parent}: is a file, but {name} writes {path} inside it; "
                               "move it or pick another path")
    if among_sources(path.parent, root=data, data=data):
        raise MinbertError(f"{name}: among the project's code, docs or data, where no command writes: "
                           + ("give data/ or a folder outside the project" if data
                              else "name a path under predictions/ or outside the project"))
    problem = output_problem(path, append)
    if problem:
        raise MinbertError(f"{name}: {problem}")
    check_writable(path.parent, name)
