"""Copying a run's files to their destinations (publishing), and a tool's files to theirs.

A run's folder is the source of truth: its files are what the run wrote, and each output folder's record says
which run's files it holds (runs/sources.py). `publish` copies a run's files in one ordered pass, with Ctrl-C
(and SIGTERM) held back until it is done and the folders locked against a second publishing process:
  0. into several folders: each folder's record names the publishing and the other folders (its marker);
  1. each file is copied beside its destination, under a hidden temporary name;
  2. each folder's record is rewritten: every destination is the run's now, with the bytes it will hold and,
     marked pending, the bytes it holds until step 3 reaches it (`was`) and the other folders (`with`);
  3. the temporary files are renamed into place, in order, and the record's pending marks (and marker) are
     removed.
A process killed in step 1 leaves temporary files and nothing else changed; killed after it, destinations
that still hold the bytes recorded as `was`. The next command that writes into the folder (a new run, the
run's --resume, prepare_submit.py: `finish_publishing`) removes the temporary files and copies each pending
file again from the run folder, once it has checked that the run's file holds the recorded bytes, in one
line. A file that neither matches (edited by hand, or its run folder gone) is left alone: prepare_submit.py
names it, and zips no mix of runs unless told to (--mixed).
Into several folders, records are written one folder at a time, so step 0 makes every folder name the others
before anything is staged: a command writing into any one of them settles them all. A publishing killed
before step 2 reached every folder (a folder still holds its marker without pending entries) had replaced
no file anywhere, and cannot be finished in the folders it had not reached: it is rolled back in all of
them, in one line; once every folder's entries were written it is finished in all of them, as above.
"""
import contextlib
import os
import shutil
import time
from pathlib import Path

from minbert.cli import interrupt_retry, set_interrupt_hint
from minbert.files import (atomic_write, deferred_interrupt, file_digest, interrupt_pending,
                           remove_temporaries, write_beside)
from minbert.runs.lock import RUN_MARK
from minbert.runs.sources import holds, origins, read_marker, read_record, run_folders, write_record, written_by


# ----------------------------------------------------------------------------- backups

def _backup_name(dest):
    stamp = time.strftime("%Y%m%d-%H%M%S")
    backup, n = dest.with_name(f"{dest.name}.{stamp}.bak"), 2
    while backup.exists() or backup.is_symlink():
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


# ----------------------------------------------------------------------------- the ordered copy

@contextlib.contextmanager
def _locked(folders):
    """Hold an exclusive flock on each folder itself (no file is added), so that a second process publishing
    into one of them waits instead of interleaving its copies, its record and its tidying with this one's.
    Where a file system has no flock, nothing is held."""
    with contextlib.ExitStack() as stack:
        # one lock per folder however it is spelled: a second flock on another spelling of a folder this process
        # holds would wait for ever on itself
        for folder in sorted({os.path.realpath(f) for f in folders}):
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


def copier(src):
    """write_fn for `place`: the bytes of the file `src`."""
    def write(fp):
        with open(src, "rb") as f:
            shutil.copyfileobj(f, fp)
    return write


def _roll_back(folder, entries, cut_short):
    """The pending entries of `folder` from a publishing cut short before it replaced any file (`cut_short`:
    {(run, dir)}) put back to what the folder held: the entry of the file there before (`was`), or none.
    Returns the names rolled back."""
    rolled = []
    for name, e in list(entries.items()):
        if "was" not in e or (e["run"], e["dir"]) not in cut_short:
            continue
        dest = folder / name
        if dest.is_file() and not dest.is_symlink() and file_digest(dest) == e["sha256"]:
            continue  # holds the new bytes all the same: the pending mark goes below
        was = e["was"]
        if was is not None and was["run"] is not None:
            entries[name] = was
        else:  # a new file, or one of the user's (--backup): no entry
            del entries[name]
        rolled.append(name)
    return rolled


def _settle(folder, log, cut_short=frozenset()):
    """The tidying of one folder, with the folder locked: temporary files a killed process left removed, the
    files of a publishing cut short before it replaced any (`cut_short`, _cut_short) left as they are and its
    entries rolled back, and each file a publishing cut short later did not put in place copied again from its
    run's folder. Returns the names rolled back."""
    remove_temporaries(folder)
    entries, restored, kept, lost = read_record(folder), {}, [], {}
    changed = read_marker(folder) is not None  # settled now, whichever way: the marker goes
    rolled = _roll_back(folder, entries, cut_short)
    changed = changed or bool(rolled)
    for name, e in entries.items():
        if "was" not in e:
            continue
        dest = folder / name
        now = file_digest(dest) if dest.is_file() and not dest.is_symlink() else None
        was = e["was"]
        stale = not dest.exists() and not dest.is_symlink() or was is not None and now == was["sha256"]
        if now != e["sha256"] and stale and holds(e["dir"], e["file"], e["sha256"]):
            if dest.exists() and was["run"] is None:  # the user's file, allowed with --backup
                kept += keep_as_backup(dest)
            atomic_write(dest, copier(Path(e["dir"]) / e["file"]))
            restored.setdefault((e["run"], e["dir"]), []).append(name)
            now = e["sha256"]
        elif now != e["sha256"] and stale:  # its run's copy changed or gone: nothing to finish it from
            lost.setdefault((e["run"], e["dir"]), []).append(name)
        if now == e["sha256"] or not stale:  # in place, or changed by hand since: no longer pending
            del e["was"]
            e.pop("with", None)
            changed = True
    if changed:
        write_record(folder, entries)
    for (run, where), names in restored.items():
        log(f"{folder}: copied run {run}'s {', '.join(names)} again from {where}, which an interruption had "
            "stopped before they were all in place")
    for (run, where), names in lost.items():
        log(f"{folder}: run {run}'s {', '.join(names)}, which an interruption stopped before they were in place, "
            f"cannot be put there: {where} no longer holds what the run wrote (changed or gone), so they stay as "
            "they were; the run's training command with --resume writes its files again from its best checkpoint")
    if kept:
        log(backup_line(kept))
    return rolled


def _links(folder):
    """The other folders a publishing under way in `folder` writes to: its marker's, and those each entry still
    pending names."""
    marker = read_marker(folder)
    links = set(marker["with"]) if marker else set()
    for e in read_record(folder).values():
        if "was" in e:
            links.update(e.get("with", ()))
    return {Path(f) for f in links}


def _linked(folders):
    """`folders` and every folder a publishing under way in one of them writes to as well (_links, followed on),
    where it may have been cut short too: tidied with these, so that a command writing into one of them never
    leaves the others half done without a word."""
    found, todo = {Path(os.path.abspath(f)) for f in folders}, list(folders)
    extra = []
    while todo:
        for other in _links(todo.pop()):
            key = Path(os.path.abspath(other))
            if key not in found and other.is_dir():
                found.add(key)
                extra.append(other)
                todo.append(other)
    return list(folders) + extra


def _cut_short(folders):
    """{(run, dir)} of the publishings into several of `folders` that were cut short before step 2 reached every
    folder: one of them still holds the publishing's marker and none of its pending entries. Such a publishing
    replaced no file anywhere (step 3 follows step 2 in every folder), and the folders it had not reached say
    nothing of their files: it is rolled back."""
    marked, pending = {}, set()
    for folder in folders:
        marker = read_marker(folder)
        if marker:
            marked.setdefault((marker["run"], marker["dir"]), set()).add(folder)
        pending.update((folder, (e["run"], e["dir"])) for e in read_record(folder).values() if "was" in e)
    return {key for key, where in marked.items() if any((f, key) not in pending for f in where)}


def _cut_short_line(run, where, rolled):
    """The one line for a publishing rolled back (_cut_short): which folders it was writing, what of it was
    pending where, and that each folder is as it was."""
    who = f"run {run}" if (Path(where) / RUN_MARK).is_file() else run
    files = "; ".join(f"{folder}: {', '.join(names)}" for folder, names in rolled if names)
    folders = ", ".join(str(f) for f, _ in rolled)
    return (f"{who}'s publishing into {folders} was cut short before it replaced any file there, so each is left "
            f"as it was" + (f" (not put in place: {files}; they are still in {where})" if files else ""))


@contextlib.contextmanager
def _settled(folders, log):
    """`folders` made, locked and tidied (_settle), with Ctrl-C held back, for as long as the block runs; so are
    the folders a publishing cut short in one of them was writing to as well (_linked)."""
    folders = sorted({canonical(f) for f in folders})
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    folders = _linked(folders)
    with deferred_interrupt(), _locked(folders):
        cut_short = _cut_short(folders)
        owners = {f: (m["run"], m["dir"]) for f in folders if (m := read_marker(f))}
        rolled = [(f, _settle(f, log, cut_short)) for f in folders]
        for run, where in sorted(cut_short):
            log(_cut_short_line(run, where, [(f, names) for f, names in rolled if owners.get(f) == (run, where)]))
        yield


def canonical(path):
    """`path` with every link in it followed (it need not exist): one spelling per folder and file, so that a
    folder reached through a link is recorded, locked and tidied as the one folder it is."""
    return Path(os.path.realpath(path))


def finish_publishing(folders, log=print):
    """Tidy each of `folders` before a command writes or reads there: what a killed publishing left is
    removed, and the files it had not yet put in place are copied from the run folder it was publishing; one
    line says so. Nothing else changes."""
    with _settled([Path(f) for f in folders if Path(f).is_dir()], log):
        pass


def _place(items, by, run_dir, mode):
    """Steps 0-3 for `items` ([(destination, write_fn(fp), its file's name in run_dir or None)]), with the
    folders locked and settled. Returns the [(file, backup)] kept (a file no run wrote, allowed by --backup:
    check_outputs ran before). A step that fails (a full disk) removes the temporary files not yet renamed;
    the record then says what is pending, for the next command."""
    staged, kept, done = [], [], 0
    folders = list(dict.fromkeys(dest.parent for dest, _, _ in items))
    markers = {f: {"run": by, "dir": str(run_dir), "with": sorted(str(o) for o in folders if o != f)}
               for f in folders} if len(folders) > 1 else {}  # one folder's record is written at once
    try:
        for folder, marker in markers.items():  # step 0: each folder names the others before any is changed
            write_record(folder, read_record(folder), marker)
        for dest, write_fn, name in items:
            tmp = write_beside(dest, write_fn, mode)
            staged.append((dest, tmp, name, file_digest(tmp)))
        by_folder = {dest.parent: read_record(dest.parent) for dest, _, _, _ in staged}
        runs = run_folders([e["dir"] for entries in by_folder.values() for e in entries.values()],
                           next(iter(by_folder)))
        for dest, tmp, name, sha in staged:
            entries = by_folder[dest.parent]
            before = next(iter(origins(dest, entries, runs)), None)
            if before is None and dest.is_file():  # a file no run wrote, allowed by --backup
                before = {"run": None, "dir": "", "file": None, "sha256": file_digest(dest)}
            entries[dest.name] = {"run": by, "dir": str(run_dir), "file": name, "sha256": sha, "was": before,
                                  "with": sorted(str(f) for f in by_folder if f != dest.parent)}
        for folder, entries in by_folder.items():
            write_record(folder, entries, markers.get(folder))
        for dest, tmp, _, sha in staged:
            was = by_folder[dest.parent][dest.name]["was"]
            if was is not None and was["run"] is None and was["sha256"] != sha:
                kept += keep_as_backup(dest)
            os.replace(tmp, dest)
            done += 1
    except BaseException:
        for _, tmp, _, _ in staged[done:]:
            tmp.unlink(missing_ok=True)
        raise
    for folder, entries in by_folder.items():  # every file in place: nothing is pending any more
        for dest, _, _, _ in staged:
            if dest.parent == folder:
                entries[dest.name].pop("was", None)
                entries[dest.name].pop("with", None)
        write_record(folder, entries)  # the marker goes with the pending marks
    return kept


def same_file(a, b):
    """Whether two paths name one file (a link or another spelling counts as the same, also for a file not
    written yet, spelled once through a link to its folder)."""
    a, b = Path(a), Path(b)
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
    except OSError:
        pass
    return canonical(a) == canonical(b)


def place(items, by, run_dir="", mode="wb", log=print):
    """Write each (destination, write_fn(fp)) in one ordered pass, recorded as written by `by` (from the
    folder `run_dir`), after tidying those folders. Returns the [(file, backup)] kept. A Ctrl-C meanwhile
    waits for the files, and the line then printed on the way out names them as written."""
    shown = [Path(d) for d, _ in items]  # as given, for the line; the work on one spelling per folder
    items = [(canonical(Path(d).parent) / Path(d).name, w) for d, w in items]
    if not items:
        return []
    with _settled([d.parent for d, _ in items], log):
        kept = _place([(d, w, None) for d, w in items], by, run_dir, mode)
        if interrupt_pending():
            set_interrupt_hint(f"{', '.join(map(str, shown))} written whole before the interrupt "
                               "took effect", retry=interrupt_retry())
        return kept


def _replaced(pairs, run_dir):
    """'run NAME (still in DIR)' for each other run whose files the destinations hold now."""
    runs = {}
    for src, dest in pairs:
        before = next(iter(origins(dest)), None)
        other = before and before["run"] and before["dir"] != str(run_dir)
        if other and before["sha256"] != file_digest(src):
            runs.setdefault((before["run"], before["dir"]), []).append(before)
    out = []
    for (run, where), files in sorted(runs.items()):
        if all(holds(where, f["file"], f["sha256"]) for f in files):
            out.append(f"run {run} (still in {where})")
        else:
            gone = f"its folder {where} is gone" if not Path(where).is_dir() else f"no longer all in {where}"
            out.append(f"run {run} ({gone})")
    return out


def publish(pairs, run_name, run_dir, log=print, what="predictions"):
    """Copy each (run file, published path) pair in one ordered pass. The line it prints names the run whose
    published files were replaced and the folder where they still are; a file there that no run wrote
    (--backup) is kept as a dated backup, and a line says so. A Ctrl-C meanwhile waits for the copy, and the
    line then printed on the way out says what was copied."""
    shown = [Path(d) for _, d in pairs]  # as given, for the lines; the work on one spelling per folder
    pairs = [(Path(s), canonical(Path(d).parent) / Path(d).name) for s, d in pairs]
    if not pairs:
        return ""
    todo = [(s, d) for s, d in pairs if not same_file(s, d)]  # published where the run wrote it: no copy
    with _settled([d.parent for _, d in todo], log):
        replaced = _replaced(todo, run_dir)  # read with the folders locked: a concurrent run is done by now
        kept = _place([(d, copier(s), s.name) for s, d in todo], run_name, run_dir, "wb") if todo else []
        dests = ", ".join(map(str, shown))
        line = f"run {run_name}'s {what} copied to {dests}"
        if replaced:
            line += f", replacing those of {'; '.join(replaced)}"
        log(line)
        if kept:
            log(backup_line(kept))
        if interrupt_pending():
            retry = interrupt_retry()
            more = f" ({retry} goes on with anything left)" if retry else ""
            set_interrupt_hint(f"run {run_name}'s {what} were all copied to {dests} before the interrupt "
                               f"took effect; its files are in {run_dir}{more}", retry=retry)
    return line


def write_output(path, write_fn, by, mode="wb"):
    """A tool's output file (--json, --out), written through write_fn(fp) and recorded as written by `by`: the
    file and its record together (`place`); the file there was allowed by check_file."""
    kept = place([(path, write_fn)], by, mode=mode)
    if kept:
        print(backup_line(kept))
    return Path(path)
