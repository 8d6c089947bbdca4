"""Run folders: every training run writes into a folder of its own, one process at a time.

Every training run writes its checkpoints, per-epoch log and prediction files into `runs/NAME/` (NAME:
`--run_name`, by default the script and a timestamp; `--run_dir DIR` anywhere). The folder is the run's alone:
  - `.minbert-run` in it marks it as a run folder, and the process writing into it holds a lock on that file
    (runs/lock.py); a second process asking for the folder is refused in one line naming the first. The file
    also records what the run published when it finished, which its --resume publishes again.
  - A folder holding files that no run wrote is refused (`--run_dir data` would mix run files among the CSVs);
    `--run_name` stays under runs/.
What a run may write outside its folder, and how it publishes its predictions: runs/outputs.py.
"""
import os
import time
from dataclasses import dataclass
from pathlib import Path, PurePath

from minbert.cli import MinbertError, is_main
from minbert.files import TEMPORARY, check_writable, file_digest, plain, remove_temporaries, what_is_there
from minbert.project_paths import among_sources, run_folder_of, too_long
from minbert.runs.lock import RUN_MARK, RunLock, a_run_of, holder, read_mark

RUNS_ROOT = Path("runs")


def new_run_name(prefix):
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}"


def published_where(settings, absolute=False):
    """The settings that say where a run publishes its files, as one string (a finished run's record): as the
    flags spell them (the same in a project moved since), or with `absolute`, each path made absolute (so that
    `predictions`, `./predictions/` and its full path are one place)."""
    def where(value):
        if not absolute or value is None:
            return value
        if isinstance(value, dict):
            return {k: where(v) for k, v in value.items()}
        return os.path.abspath(value)
    return repr([(f, str(where(getattr(settings, f)))) for f in ("published", "predictions_dir", "out",
                                                                   "sonnet_out") if hasattr(settings, f)])


MAX_NAME = 100  # characters in a run's name: printed in every line about it, and a folder's name on any disk


def check_path_name(path, flag):
    """One line when a folder name a flag gives cannot be one: empty, a part longer than a file system takes
    (255 bytes), or holding a control character (a newline would split every line that names it)."""
    text = str(path)
    if not text.strip():
        raise MinbertError(f"{flag} {text!r}: empty; name a folder, or leave the flag out")
    bad = next((c for c in text if ord(c) < 32 or ord(c) == 127), None)
    if bad is not None:
        raise MinbertError(f"{flag} {text!r}: holds the control character {bad!r}, which would split or "
                           "garble every line that names the run: pick a name of letters, digits, '-', '_' "
                           "and '.'")
    try:
        too_long(text)
    except MinbertError as e:
        raise MinbertError(f"{flag} {e}") from None


def check_run_name(name, flag="--run_name", root=RUNS_ROOT):
    """`name` as a folder under `root`: relative, no '..', not empty, no control characters, at most MAX_NAME
    characters. Returns it."""
    if len(name) > MAX_NAME:  # before the file system's own limit (255 bytes a part), which is looser
        raise MinbertError(f"{flag} {name[:40]}...: {len(name)} characters; a name is at most {MAX_NAME} "
                           "(every line about the run prints it): pick a shorter one")
    check_path_name(name, flag)
    pure = PurePath(name)
    if pure.is_absolute() or not pure.parts or ".." in pure.parts or name != name.strip():
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

    def as_inputs(self):
        """[(what, path)] of the files the run keeps for itself, which no output of it may name
        (runs/outputs.check_outputs' inputs): its checkpoints, its log and the folder's mark."""
        return [("this run's checkpoint", self.best), ("this run's checkpoint", self.last),
                ("this run's log", self.log), ("this run's folder's mark", self.folder / RUN_MARK)]


def is_run_folder(folder):
    """A folder a run wrote: marked, or (an earlier minbert's, before the mark) holding a run's log."""
    folder = Path(folder)
    return (folder / RUN_MARK).is_file() or any(folder.glob("*-log.jsonl"))


def pipeline_of(folder):
    """Which pipeline's run wrote `folder`, as its mark says (None: no mark, or an earlier minbert's)."""
    return read_mark(folder).get("pipeline")


def best_checkpoint(folder, pipeline, flag):
    """A run folder given where a checkpoint is asked for: its best checkpoint, when `pipeline`'s run wrote the
    folder and it holds one; else one line saying what the folder is."""
    folder = Path(folder)
    wrote = pipeline_of(folder)
    if wrote not in (None, pipeline):
        raise MinbertError(f"{flag} {folder}: the folder of {a_run_of(wrote)}; {flag} takes "
                           f"{a_run_of(pipeline)}'s checkpoint or folder")
    best = sorted(f for f in folder.glob("*.pt") if not f.name.endswith("-last.pt"))
    if len(best) != 1:
        raise MinbertError(f"{flag} {folder}: a folder with "
                           + (f"{len(best)} checkpoints ({', '.join(f.name for f in best)}); give the one to use"
                              if best else "no best checkpoint (NAME.pt) in it: not a finished run's folder"))
    return best[0]


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


def recorded_flags(folder):
    """The flags that define the run in `folder`, as its mark records them (Run.note_flags; a Part 1 run's
    first dataset's), or None: no mark (a folder no run wrote), or no model recorded there (an ensemble's,
    or a run of a minbert before the mark held them)."""
    noted = read_mark(folder).get("flags")
    if not isinstance(noted, dict) or not noted:
        return None
    flags = noted[sorted(noted)[0]]
    return flags if isinstance(flags, dict) else None


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

    def note_flags(self, stem, flags):
        """Record, in the folder's mark, the flags that define model `stem` (runs/identity.run_defining, as its
        checkpoints carry them), so that a command reading runs finds them without loading a checkpoint."""
        if self.lock is None:
            return
        noted = holder(self.lock.fd).get("flags")
        self.lock.note("flags", {**(noted if isinstance(noted, dict) else {}), stem: plain(flags)})

    def note_outputs(self, stem, result, published, settings):
        """Record, in the folder's mark, the files model `stem` wrote for publishing (their sha256, the paths
        they went to as the flags gave them, and the flags saying where: `published_where`) and the pipeline's
        result: what a --resume of the finished run publishes again instead of scoring the model anew. Nothing
        for a model that publishes nothing."""
        if self.lock is None or not published:
            return
        outputs = holder(self.lock.fd).get("outputs")
        outputs = outputs if isinstance(outputs, dict) else {}
        outputs[stem] = {"result": plain(result), "where": published_where(settings),
                         "where_absolute": published_where(settings, absolute=True),
                         "published": [[Path(s).name, str(d)] for s, d in published],
                         "files": {Path(s).name: file_digest(s) for s, _ in published}}
        if getattr(settings, "results", None) is not None:  # the table its row went to (Part 2's --results)
            outputs[stem]["table"] = os.path.abspath(settings.results)
        self.lock.note("outputs", outputs)

    def finished(self, stem, settings):
        """What model `stem` recorded when it finished (note_outputs): {result, published: [(file, path)]}, or
        None when it recorded nothing, or a file it wrote is missing or changed since (a line says which):
        then its outputs are written again. Refused in one line when the flags now send its files, or a typed
        --results its row, elsewhere: --resume neither scores a finished run again nor publishes it under other
        paths. The default table elsewhere (the project moved since) gets a line saying where the row is."""
        info = holder(self.lock.fd) if self.lock is not None else {}
        done = (info.get("outputs") or {}).get(stem) if isinstance(info.get("outputs"), dict) else None
        if not isinstance(done, dict) or not isinstance(done.get("files"), dict):
            return None
        for name, digest in done["files"].items():
            path = self.folder / name
            if not path.is_file() or path.is_symlink() or file_digest(path) != digest:
                print(f"{path}: {'changed since' if path.exists() else 'missing, though'} the run wrote it; "
                      f"{stem}'s outputs are written again from its best checkpoint")
                return None
        if (done.get("where") != published_where(settings)
                and done.get("where_absolute") != published_where(settings, absolute=True)):
            raise MinbertError(f"{self.how}: the run had finished, and --resume neither scores it again nor "
                               "publishes it under other paths than its own (--*_out, --predictions_dir or "
                               f"--sonnet_out differ): its files are in {self.folder}; copy them where you "
                               f"want them (prepare_submit.py --publish {self.folder} puts them at the "
                               "handout's paths)")
        table = getattr(settings, "results", None)
        table = os.path.abspath(table) if table is not None else None
        elsewhere = isinstance(done.get("table"), str) and table is not None and table != done["table"]
        if elsewhere and getattr(settings, "results_given", False):
            raise MinbertError(f"{self.how}: the run had finished and its row is in {done['table']}; "
                               f"--resume scores nothing again, so it has no row for --results {table}: "
                               f"leave --results out (report.py {self.folder} shows the run's scores)")
        anew = (" (multitask_classifier.py --eval_only FILE scores it anew, in a run folder of its own)"
                if hasattr(settings, "eval_only") else "")
        print(f"{stem}: the run had finished, nothing is left to train; its files in {self.folder} stay as "
              f"they were, not scored again{anew}")
        if elsewhere:  # the default table, in a project moved or copied since (or the run gave --results)
            print(f"{stem}: its results row went to {done['table']} when it finished; none is added to "
                  f"{table} (report.py {self.folder} shows the run's scores)")
        return {"result": done.get("result"), "published": [(self.folder / s, Path(d)) for s, d in
                                                            done.get("published", [])]}

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
    check_path_name(folder, flag)
    if folder.is_symlink() and not folder.exists() or folder.exists() and not folder.is_dir():
        raise MinbertError(f"{flag} {folder}: is {what_is_there(folder)}, but a run folder goes there; "
                           "move it or pick another name")
    below = next((p for p in folder.parents if p.exists() and not p.is_dir()), None)
    if below is not None:  # making the folder would fail with a traceback
        raise MinbertError(f"{flag} {folder}: {below} is a file, but the run folder would go inside it; "
                           "move it or pick another name")
    check_run_place(folder, flag)
    check_writable(folder, f"{flag} {folder}")
    if folder.is_dir() and any(folder.iterdir()) and not is_run_folder(folder):
        example = sorted(p.name for p in folder.iterdir())[0]
        raise MinbertError(f"{flag} {folder}: not a run folder: it holds files no run wrote ({example}, "
                           "...), which the run's files would mix "
                           "with or replace; give a new or empty folder")
    run = Run(run_name or folder.name, folder, f"{flag} {folder}" if run_dir else f"--run_name {folder.name}",
              created=next((p for p in reversed([folder, *folder.parents]) if not p.exists()), None))
    # the folder named as the user gave it: a typed --run_name NAME is not runs/NAME
    named = f"--run_name {run_name} ({folder})" if run_name and not run_dir else f"{flag} {folder}"
    if is_main():
        run.lock = RunLock(folder).acquire(flag, prefix, named)
    try:
        # a run starts in a folder holding nothing but its mark: never beside another model's files (a Part 1
        # run of another fine-tune mode writes other names, but the folder is one run's)
        held = (sorted(p for p in folder.iterdir() if p.name != RUN_MARK and not TEMPORARY.match(p.name))
                if folder.is_dir() else [])
        if held and not resume:
            ours = [p for s in stems or () for p in RunFiles(folder, s).exist()]
            raise MinbertError(f"{named}: already holds a run ({(ours or held)[0].name}); choose another"
                               + (", or add --resume to continue it" if ours else ""))
    except BaseException:
        run.close()
        raise
    if run.lock is not None:
        run.lock.claim()
        remove_temporaries(folder)  # what a killed run of this folder was writing (a checkpoint, say)
    return run
