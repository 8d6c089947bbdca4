"""The one rule for every file the project writes outside a run's own folder (every script and tool calls it
before it writes: predictions, --*_out, --results, --json, --out, --dest, reports, ensembles):

  - a new file may be created;
  - an existing file is replaced only if this project wrote it and no one has changed it since: each folder's
    `.sources.json` records who wrote each file there, with its sha256 (`record`, `written_by`);
  - never a file of the project itself (its code, docs, data/), an input of the run, or a file inside another
    run's folder (whose files belong to that run's checkpoint and log);
  - otherwise one line says what is there and how to proceed; where it makes sense `--backup` lets the file
    be kept as a dated backup (NAME.YYYYmmdd-HHMMSS.bak) instead (`protect`).
`check_outputs` applies it before training, not after; `check_file` is the same for a tool's single output.
The handout's paths (`predictions/*.csv`, what `prepare_submit.py` zips) then get a copy of the files of the
run just finished, and one line says which run's files they replaced; those stay in that run's folder (`publish`).
"""
import csv
import hashlib
import json
import os
import time
from pathlib import Path

from minbert.files import atomic_write
from minbert.runs.folders import run_folder_of
from minbert.runs.places import among_sources, in_project
from utils import MinbertError

SOURCES = ".sources.json"


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


def append_once(path, fields, row, key="run"):
    """append_row, unless the table already holds a row with this row's `key` (the run's name): a run resumed after
    it published, or after it finished, is recorded once. Returns whether the row was added."""
    path = Path(path)
    if path.is_file():
        with open(path, encoding="utf-8", errors="replace", newline="") as fp:
            if any(r.get(key) == str(row[key]) for r in csv.DictReader(fp)):
                return False
    append_row(path, fields, row)
    return True


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


def check_replace(name, path, backup=None):
    """The rule for an existing file at `path` (named `name` in messages) that a command would replace: fine when
    this project wrote it and it is unchanged; a project file never; anything else only with --backup (`backup`
    True; None where the command offers no --backup)."""
    path = Path(path)
    if not path.is_file() or written_by(path) is not None:
        return
    if in_project(path):
        raise MinbertError(f"{name}: is one of the project's own files (code, docs or course data), which no command "
                           f"replaces: name a file under predictions/ or outside the project")
    if not backup:
        raise MinbertError(f"{name}: holds a file this project did not write (or one changed since it did), which would "
                           f"be lost: move it or name another path" + (", or add --backup to keep it as "
                           f"{path.name}.DATE.bak" if backup is False else ""))


def check_file(path, flag, inputs=()):
    """A tool's single output file (--json, --out): one line when it may not be written (check_outputs' rules)."""
    check_outputs(files=[(flag, path)], inputs=inputs)


def wrote(path, by):
    """Record that the command `by` wrote `path` (so that it may replace it next time)."""
    record([path], by, "")


def check_outputs(dirs=(), files=(), inputs=(), own=None, backup=None, tables=()):
    """Fail before training, not after it, when an output cannot or must not be written:
      - a folder that is a file, a file that is a folder, or a parent that is a file;
      - two outputs naming one file;
      - an output that is one of the run's `inputs` ([(what, path)]: data files, a checkpoint it reads);
      - an output inside another run's folder (a folder holding `.minbert-run` other than `own`, this run's);
      - an existing file the rule does not let it replace (check_replace; `backup` as there).
    `dirs`, `files` and `tables` (files rows are appended to, which replace nothing: check_table) are paths or
    (flag, path) pairs; the flag names the output in the message."""
    own = Path(os.path.abspath(own)) if own is not None else None
    seen = []
    named = [(d, True) for d in _named(dirs)] + [(f, False) for f in _named(files)]
    named += [(t, False) for t in _named(tables)]
    appended = {str(t[1]) for t in _named(tables)}
    for (flag, path), want_dir in named:
        name = f"{flag} {path}" if flag else str(path)
        if path.exists() and path.is_dir() != want_dir:
            raise MinbertError(f"{name}: is a {'file' if want_dir else 'folder'}, but the run writes a "
                               f"{'folder' if want_dir else 'file'} there; move it or pick another path")
        for parent in path.parents:
            if parent.exists() and not parent.is_dir():
                raise MinbertError(f"{parent}: is a file, but the run writes {path} inside it; "
                                   f"move it or pick another path")
        if among_sources(path if want_dir else path.parent, root=want_dir):
            raise MinbertError(f"{name}: among the project's code, docs or data, where no command writes: name a path "
                               f"under predictions/ or outside the project")
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
        if (folder is None or folder != own) and str(path) not in appended:
            check_replace(name, path, backup)


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
