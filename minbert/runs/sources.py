"""Who wrote each file of an output folder, judged by its contents.

Each folder the project writes into outside a run's own (predictions/, --out, --json's folder) holds
`.sources.json`: for each file there, which run or tool wrote it, from which file of which folder, and its
sha256 (`record`; while a publishing is under way, also what the file holds until it is replaced: `was`,
and, for a publishing into several folders, the folders it writes to: `read_marker`). A
file is the project's when its bytes are those its entry names, or those of the same file in a run folder
(`origins`), so that a record deleted or edited by hand misleads no command: an entry whose run folder holds
other bytes is not believed, and a file nothing accounts for is no run's. The next command then replaces what
the project wrote and nothing else (runs/outputs.py's rule), and prepare_submit.py names each file's run.
"""
import json
import os
import re
from pathlib import Path

from minbert.cli import MinbertError
from minbert.files import atomic_write, file_digest
from minbert.project_paths import PROJECT, output_problem
from minbert.runs.lock import RUN_MARK

SOURCES = ".sources.json"
# The record's key for the publishing under way through its folder (runs/publishing.py): no file can be named
# with a slash, so no file's entry takes it.
MARKER = "/publishing"
_SHA = re.compile(r"^[0-9a-f]{64}$")


def _plain_name(name):
    return isinstance(name, str) and name not in ("", ".", "..", SOURCES) and Path(name).name == name


def _entry(e):
    """A record entry ({run, dir, file, sha256} and, pending, was and the other folders its publishing wrote to,
    `with`), or None for one this project did not write (edited by hand): such an entry is ignored, and its file
    judged by its contents alone."""
    if not (isinstance(e, dict) and isinstance(e.get("sha256"), str) and _SHA.match(e["sha256"])
            and isinstance(e.get("run"), (str, type(None))) and isinstance(e.get("dir", ""), str)
            and (e.get("file") is None or _plain_name(e["file"]))):
        return None
    others = e.get("with")
    return {k: e.get(k) for k in ("run", "dir", "file", "sha256")} | (
        {"was": _entry(e["was"]) if e["was"] is not None else None} if "was" in e else {}) | (
        {"with": others} if isinstance(others, list) and all(isinstance(f, str) for f in others) else {})


def _record_file(folder):
    """The record's path, or one line when what has that name is not a regular file the project could read."""
    path = Path(folder) / SOURCES
    if path.is_symlink() or path.exists() and not path.is_file():
        raise MinbertError(f"{path}: not the record of written files this project keeps there (a link, a "
                           "folder or a device has its name): move it away")
    return path


def check_record(folder, replace=True):
    """One line when `folder` holds a `.sources.json` this project did not write (a file of the user's under
    that name, or one edited until it is no longer a record), which recording there would replace; with
    `replace` (a command about to write there), also when the record cannot be replaced (immutable,
    write-protected): every file written there updates it, so that would fail after the work, not before."""
    path = _record_file(folder)
    if not path.exists():
        return
    problem = output_problem(path) if replace else None
    if problem:
        raise MinbertError(f"{path}: the record of which files the project wrote in that folder, updated by "
                           f"every file written there, {problem}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = None
    if not isinstance(data, dict):
        raise MinbertError(f"{path}: not the record of written files this project keeps there (a file of "
                           "yours, or one edited by hand): move it away; the project then tells its files by "
                           "their contents")


def read_record(folder):
    """{file name: entry} of `folder`'s record; entries this project did not write are left out."""
    path = _record_file(folder)
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        data = {}
    entries = ((name, _entry(e)) for name, e in (data.items() if isinstance(data, dict) else ()))
    return {name: e for name, e in entries if _plain_name(name) and e is not None}


def read_marker(folder):
    """The publishing into several folders under way through `folder` ({run, dir, with: the other folders}),
    as its record names it, or None."""
    path = _record_file(folder)
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        data = {}
    m = data.get(MARKER) if isinstance(data, dict) else None
    ok = (isinstance(m, dict) and isinstance(m.get("run"), str) and isinstance(m.get("dir"), str)
          and isinstance(m.get("with"), list) and all(isinstance(f, str) for f in m["with"]))
    return {k: m[k] for k in ("run", "dir", "with")} if ok else None


def write_record(folder, entries, marker=None):
    """`folder`'s record: `entries` ({file name: entry}) and, with `marker`, the publishing under way there."""
    data = {**entries, **({MARKER: marker} if marker else {})}
    atomic_write(Path(folder) / SOURCES, lambda fp: json.dump(data, fp, indent=1, sort_keys=True), mode="w")


def record(dests, run_name, run_dir="", files=None):
    """Note in each destination folder's record that `run_name` (from the folder `run_dir`) wrote `dests`, as
    they are now (`files`: the name each has in run_dir, when it was copied from there)."""
    by_folder = {}
    for i, dest in enumerate(map(Path, dests)):
        by_folder.setdefault(dest.parent, []).append((dest, files[i] if files else None))
    for folder, items in by_folder.items():
        entries = read_record(folder)
        for dest, name in items:
            entries[dest.name] = {"run": run_name, "dir": str(run_dir), "file": name,
                                  "sha256": file_digest(dest)}
        write_record(folder, entries, read_marker(folder))


def run_folders(extra=(), near=None):
    """The run folders a file may have come from: those named in `extra`, and every one under runs/ and
    gpt2/runs/ of the project, of the current folder and (`near`: an output folder) of the folder above it."""
    found = {Path(os.path.abspath(d)) for d in extra if d and (Path(d) / RUN_MARK).is_file()}
    homes = {PROJECT, Path.cwd()} | ({Path(os.path.abspath(near)).parent} if near is not None else set())
    for top in {home / sub for home in homes for sub in ("runs", "gpt2/runs")}:
        if top.is_dir():
            found.update(m.parent for m in top.glob(f"**/{RUN_MARK}"))
    return sorted(found)


def holds(folder, name, digest, size=None):
    """Whether run folder `folder` holds a regular file `name` with these bytes (of `size`, when known: only
    a file of that size is read)."""
    path = Path(folder) / name if folder and _plain_name(name) else None
    return (path is not None and (Path(folder) / RUN_MARK).is_file() and path.is_file()
            and not path.is_symlink() and size in (None, path.stat().st_size) and file_digest(path) == digest)


def believable(e):
    """Whether a record entry whose sha256 matches a file may be taken at its word: a tool's file (no run
    folder), or one whose run folder is gone (deleted to make room), or whose run folder holds those bytes.
    An entry naming a folder that holds other bytes, or that is no run's, was edited by hand."""
    where = e.get("dir")
    return not e.get("file") or not where or not Path(where).exists() or holds(where, e["file"], e["sha256"])


def origins(dest, entries=None, folders=None):
    """Where the bytes of the file `dest` came from: [{run, dir, file, sha256}], the record's own claim first
    when the bytes match it (or what it held before a publishing cut short) and its run folder does not
    contradict it, then every run folder holding a file of that name with those bytes. Empty for a file the
    project did not write (or one changed since), and for what is not a regular file."""
    dest = Path(dest)
    if dest.is_symlink() or not dest.is_file():
        return []
    digest, size = file_digest(dest), dest.stat().st_size
    entry = (read_record(dest.parent) if entries is None else entries).get(dest.name)
    claims = (entry, (entry or {}).get("was"))  # (a "was" of no run's: the user's file, kept by --backup)
    found = [e for e in claims if e and e["run"] is not None and e["sha256"] == digest and believable(e)][:1]
    found = [{k: e[k] for k in ("run", "dir", "file", "sha256")} for e in found]
    named = {e["file"] for e in found if e.get("file")} | {dest.name}
    for folder in (run_folders([e["dir"] for e in found], dest.parent) if folders is None else folders):
        for name in sorted(named):
            if str(folder) not in {e["dir"] for e in found} and holds(folder, name, digest, size):
                found.append({"run": folder.name, "dir": str(folder), "file": name, "sha256": digest})
    return found


def written_by(dest):
    """Who wrote the file at `dest` ({run, dir, file, sha256}), or None when no run or tool of this project
    did or it changed since (`origins`)."""
    return next(iter(origins(dest)), None)
