"""Who wrote each file of an output folder, and putting files there all or nothing.

Each folder the project writes into outside a run's own (predictions/, --out, --json's folder) holds
`.sources.json`: for each file a run or a tool wrote there, which one, from which folder, and the file's
sha256 (`record`, `written_by`), so that the next command replaces what the project wrote and nothing
else (runs/outputs.py's rule).

`publish` (a run's files copied to the handout's paths) and `write_output` (a tool's file) put their files in
place as one unit, so that a Ctrl-C, a killed process or a full disk never leaves a folder holding some files
of this run and some of the one before, with a record that matches neither:
  1. each file is written whole beside its destination under a hidden name of its own (staged); an
     interrupt or an error here removes them, and nothing else has changed;
  2. `.publishing.json`, the record of intent, says in each folder which staged file becomes which file, with
     its sha256, and which file there is kept as a dated backup instead of replaced (--backup);
  3. the staged files are renamed into place, `.sources.json` records them, and the intent is removed.
Steps 2 and 3 run with Ctrl-C deferred (files.deferred_interrupt) and the folder locked against a second
publishing process; one killed among them leaves the intent, which the next command writing into that folder
(a new run, the run's --resume, prepare_submit.py) carries out before anything else (`finish_publishing`).
"""
import contextlib
import json
import os
import shutil
import time
from pathlib import Path

from minbert.files import atomic_write, deferred_interrupt, file_digest, write_beside
from utils import MinbertError

SOURCES = ".sources.json"
INTENT = ".publishing.json"


def _read_json(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def _read_sources(path):
    data = _read_json(path)
    return data if isinstance(data, dict) else {}


def _is_plain_name(name):
    return isinstance(name, str) and name not in ("", ".", "..") and Path(name).name == name


def check_record(folder):
    """One line when `folder` holds a `.sources.json` or `.publishing.json` this project did not write (a file
    of the user's under that name), which recording or publishing there would replace."""
    folder = Path(folder)
    sources = _read_json(folder / SOURCES) if (folder / SOURCES).exists() else {}
    if not (isinstance(sources, dict) and all(isinstance(v, dict) and "run" in v for v in sources.values())):
        raise MinbertError(f"{folder / SOURCES}: not the record of written files this project keeps there "
                           "(the project writes that name in every folder "
                           "it writes into): move it, or name another folder")
    if (folder / INTENT).exists():
        _read_intent(folder / INTENT)


def _intent_entry(f):
    return (isinstance(f, dict) and _is_plain_name(f.get("name")) and isinstance(f.get("sha256"), str)
            and all(f.get(k) is None or _is_plain_name(f[k]) for k in ("stage", "backup")))


def _read_intent(path):
    intent = _read_json(path)
    files = intent.get("files") if isinstance(intent, dict) else None
    if not (isinstance(files, list) and all(map(_intent_entry, files))
            and isinstance(intent.get("run"), str) and isinstance(intent.get("dir"), str)):
        raise MinbertError(f"{path}: not a record of publishing this project wrote (the project writes that "
                           "name while it copies files into "
                           f"{Path(path).parent}): move it, or name another folder")
    return intent


def written_by(dest):
    """The record of the run that wrote the file at `dest` (from its folder's .sources.json), or None when no
    run did or the file changed since."""
    rec = _read_sources(Path(dest).parent / SOURCES).get(Path(dest).name)
    if not isinstance(rec, dict):
        return None
    if "sha256" in rec and Path(dest).is_file() and file_digest(dest) != rec["sha256"]:
        return None
    return rec


def record(dests, run_name, run_dir):
    """Note in each destination folder's .sources.json which run wrote `dests`, with their sha256."""
    by_folder = {}
    for dest in map(Path, dests):
        by_folder.setdefault(dest.parent, []).append(dest)
    for folder, files in by_folder.items():
        sources = _read_sources(folder / SOURCES)
        for dest in files:
            sources[dest.name] = {"run": run_name, "dir": str(run_dir), "sha256": file_digest(dest)}
        atomic_write(folder / SOURCES, lambda fp: json.dump(sources, fp, indent=1, sort_keys=True), mode="w")


def _backup_name(dest):
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup, n = dest.with_name(f"{dest.name}.{stamp}.bak"), 2
    while backup.exists():
        backup, n = dest.with_name(f"{dest.name}.{stamp}-{n}.bak"), n + 1
    return backup


def keep_as_backup(dest):
    """Rename the file at `dest` to a dated backup beside it; returns [(dest, backup)] for backup_line."""
    backup = _backup_name(Path(dest))
    os.replace(dest, backup)
    return [(Path(dest), backup)]


def protect(dests):
    """Before `dests` are written: each one that exists and that no run wrote (or that changed since) is
    renamed to a dated backup beside it (NAME.YYYYmmdd-HHMMSS.bak). Returns [(dest, backup)]."""
    return [k for d in map(Path, dests) if d.is_file() and written_by(d) is None for k in keep_as_backup(d)]


def backup_line(kept):
    """The one line saying which files were kept as backups (empty when none)."""
    if not kept:
        return ""
    return ("kept files that no run wrote (or that changed since) as dated backups: "
            + ", ".join(f"{d} -> {b.name}" for d, b in kept))


# ----------------------------------------------------------------------------- all or nothing

@contextlib.contextmanager
def _locked(folders):
    """Hold an exclusive flock on each folder itself (no file is added), so that a second process publishing
    into one of them waits instead of carrying out an intent still being carried out. Where a file system has
    no flock, nothing is held."""
    with contextlib.ExitStack() as stack:
        for folder in sorted(set(folders)):
            try:
                import fcntl
                fd = os.open(folder, os.O_RDONLY)
            except (ImportError, OSError):
                continue
            stack.callback(os.close, fd)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError:
                pass
        yield


def _carry_out(folder, intent):
    """Step 3 for one folder: each staged file still there renamed into place (the file it replaces kept as a
    backup when the intent says so, or when it is not the file the intent saw there), what holds the intended
    bytes recorded, the intent removed. Running it again after an interruption finishes what is left. Returns
    the [(file, backup)] it kept."""
    kept, done = [], []
    for f in intent["files"]:
        dest = folder / f["name"]
        stage = folder / f["stage"] if f.get("stage") else None
        if stage is not None and stage.is_file():
            if dest.is_file() and (f.get("backup") or file_digest(dest) != f.get("was")):
                named = folder / f["backup"] if f.get("backup") else None
                backup = named if named is not None and not named.exists() else _backup_name(dest)
                os.replace(dest, backup)
                kept.append((dest, backup))
            os.replace(stage, dest)
        if dest.is_file() and file_digest(dest) == f["sha256"]:
            done.append(dest)
    if done:
        record(done, intent["run"], intent["dir"])
    os.remove(folder / INTENT)
    return kept


def finish_publishing(folders, log=print):
    """Carry out the intent a publishing process killed in step 3 left in any of `folders`, so that each holds
    all of its files and a record that matches them; one line says so."""
    folders = [Path(f) for f in folders if (Path(f) / INTENT).exists()]
    if not folders:
        return
    with deferred_interrupt(), _locked(folders):
        for folder in folders:
            if not (folder / INTENT).exists():  # another process finished it while this one waited
                continue
            intent = _read_intent(folder / INTENT)
            kept = _carry_out(folder, intent)
            log(f"{folder}: finished putting run {intent['run']}'s files in place ("
                + ", ".join(f["name"] for f in intent["files"]) + "), which an interruption had cut short")
            if kept:
                log(backup_line(kept))


def _commit(staged, run_name, run_dir):
    """Steps 2 and 3 for `staged` ([(destination, staged file or None when the file there already holds these
    bytes, sha256)]). Returns the [(file, backup)] kept."""
    intents = {}
    for dest, stage, sha in staged:
        backup = dest.is_file() and written_by(dest) is None  # allowed by --backup: check_outputs ran before
        intents.setdefault(dest.parent, {"run": run_name, "dir": str(run_dir), "files": []})["files"].append(
            {"name": dest.name, "stage": stage.name if stage else None, "sha256": sha,
             "was": file_digest(dest) if dest.is_file() else None,
             "backup": _backup_name(dest).name if backup and stage else None})
    with deferred_interrupt(), _locked(intents):
        written = []
        try:
            for folder, intent in intents.items():
                written.append(atomic_write(folder / INTENT, lambda fp: json.dump(intent, fp, indent=1),
                                            mode="w"))
        except BaseException:  # nothing has moved yet: every folder stays as it was
            for path in written + [stage for _, stage, _ in staged if stage is not None]:
                path.unlink(missing_ok=True)
            raise
        return [k for folder, intent in intents.items() for k in _carry_out(folder, intent)]


def _stage(items, mode="wb"):
    """Step 1: [(destination, write_fn(fp))] -> [(destination, staged file or None, sha256)]. The staged files
    are removed again when any write fails or is interrupted."""
    staged = []
    try:
        for dest, write_fn in items:
            stage = write_beside(dest, write_fn, mode, suffix=".publish")
            sha = file_digest(stage)
            if dest.is_file() and file_digest(dest) == sha:  # already there: recorded, not replaced
                stage.unlink()
                stage = None
            staged.append((dest, stage, sha))
    except BaseException:
        for _, stage, _ in staged:
            if stage is not None:
                stage.unlink(missing_ok=True)
        raise
    return staged


def copier(src):
    """write_fn for `place`: the bytes of the file `src`."""
    def write(fp):
        with open(src, "rb") as f:
            shutil.copyfileobj(f, fp)
    return write


def same_file(a, b):
    """Whether two paths name one file (a link or another spelling counts as the same)."""
    a, b = Path(a), Path(b)
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return Path(os.path.abspath(a)) == Path(os.path.abspath(b))


def place(items, by, run_dir="", mode="wb", log=print):
    """Write each (destination, write_fn(fp)) all or nothing, recorded as written by `by` (from the folder
    `run_dir`), after finishing any publishing cut short in those folders. Returns the [(file, backup)] kept
    (the destinations check_outputs allowed with --backup)."""
    items = [(Path(d), w) for d, w in items]
    finish_publishing({d.parent for d, _ in items if d.parent.is_dir()}, log)
    return _commit(_stage(items, mode), by, run_dir) if items else []


def publish(pairs, run_name, run_dir, log=print, what="predictions"):
    """Copy each (run file, published path) pair, all or nothing (`place`). The line it prints names the run
    whose published files were replaced and the folder where they still are; a file there that no run wrote
    (--backup) is kept as a dated backup, and a line says so."""
    pairs = [(Path(s), Path(d)) for s, d in pairs]
    if not pairs:
        return ""
    replaced, items = set(), []
    for src, dest in pairs:
        if same_file(src, dest):  # published where the run wrote it: nothing to copy
            continue
        old = written_by(dest) if dest.is_file() else None
        if old is not None and old.get("sha256") != file_digest(src):
            gone = not Path(old["dir"]).is_dir()
            where = f"its folder {old['dir']} is gone" if gone else f"still in {old['dir']}"
            replaced.add(f"run {old['run']} ({where})")
        items.append((dest, copier(src)))
    kept = place(items, run_name, run_dir, log=log)
    line = f"run {run_name}'s {what} copied to " + ", ".join(str(d) for _, d in pairs)
    if replaced:
        line += f", replacing those of {'; '.join(sorted(replaced))}"
    log(line)
    if kept:
        log(backup_line(kept))
    return line


def write_output(path, write_fn, by, mode="wb"):
    """A tool's output file (--json, --out), written through write_fn(fp) and recorded as written by `by`: the
    file and its record together (`place`); the file there was allowed by check_file."""
    kept = place([(path, write_fn)], by, mode=mode)
    if kept:
        print(backup_line(kept))
    return Path(path)
