"""The one rule for every file the project writes outside a run's own folder (every script and tool calls it
before it writes: predictions, --*_out, --results, --json, --out, reports, ensembles, the zip):

  - an output is a regular file or nothing: a link, a folder, a device or a named pipe is refused, and so is
    an existing file that cannot be written (immutable, write-protected), before any work (project_paths.py);
  - a new file may be created;
  - an existing file is replaced only if this project wrote it and no one has changed it since: its bytes are
    those its folder's `.sources.json` records, or those of a run folder's file (runs/sources.py);
  - never a file of the project itself (its code, docs, data/) or a file named like a course data file
    wherever it is (course_files.COURSE_FILES), an input of the run, or a file inside another run's folder
    (whose files belong to that run's checkpoint and log);
  - otherwise one line says what is there and how to proceed; where it makes sense `--backup` lets the file
    be kept as a dated backup (NAME.YYYYmmdd-HHMMSS.bak) instead.
A message names an output after its flag only when the user typed that flag (`Output`): a default path is named
alone, and the flag is offered as the way to write elsewhere.
`check_outputs` applies it before training, not after; `check_file` is the same for a tool's single output.
The handout's paths (`predictions/*.csv`, what `prepare_submit.py` zips) then get a copy of the files of the
run just finished, in one ordered pass, and one line says which run's files they replaced; those stay in that
run's folder (`publish`, runs/publishing.py, which also finishes a publishing an interruption cut short).
"""
import csv
import os
from pathlib import Path
from typing import NamedTuple, Optional

from minbert.cli import MinbertError, flag_spelling
from minbert.course_files import COURSE_FILES
from minbert.files import check_writable, deferred_interrupt, what_is_there
from minbert.project_paths import among_sources, check_output, in_project, run_folder_of, too_long
from minbert.runs.publishing import finish_publishing, same_file
from minbert.runs.sources import SOURCES, believable, check_record, read_record, written_by


# The columns of Part 2's results table (multitask_classifier.py --results), one row per finished run, appended to
# and never replaced: the runs' record, which report.py --results ranks.
RESULTS_TABLE = ["run", "training", "pair_encoding", "pooling", "fine_tune_mode", "pretrained", "lr", "batch_size",
                 "epochs", "steps_per_epoch", "seed", "loss_weights", "sst_acc", "quora_acc", "sts_r", "mean",
                 "best_epoch", "minutes"]


def append_row(path, fields, row):
    """Append `row` to the CSV table at `path` (its header first if the file is new)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists() or path.stat().st_size == 0
    with deferred_interrupt(), open(path, "a", newline="") as fp:  # never half a row
        w = csv.DictWriter(fp, fields)
        if new:
            w.writeheader()
        w.writerow(row)


def append_once(path, fields, row, key="run"):
    """append_row, unless the table already holds a row with this row's `key` (the run's name): a run resumed
    after it published, or after it finished, is recorded once. Returns whether the row was added."""
    path = Path(path)
    if path.is_file():
        with open(path, encoding="utf-8", errors="replace", newline="") as fp:
            if any(r.get(key) == str(row[key]) for r in csv.DictReader(fp)):
                return False
    append_row(path, fields, row)
    return True


class Output(NamedTuple):
    """An output path and the flag that chooses it (None: no flag does), as a message names it: after the flag
    when the user typed it; alone when it is the flag's default (naming the flag would say it was given), with
    the flag offered as the way to write elsewhere (`metavar`: what the flag takes)."""
    flag: Optional[str]
    path: Path
    typed: bool = True
    metavar: str = "PATH"

    @property
    def name(self):
        return f"{self.flag} {self.path}" if self.flag and self.typed else str(self.path)

    @property
    def elsewhere(self):
        """What a message offers after "move it or": another path, through the flag where it was not typed."""
        return f"write elsewhere with {self.flag} {self.metavar}" if self.flag and not self.typed else \
            "name another path"


def _named(items, typed=None, dir_flags=()):
    """[Output] from a list of paths, (flag, path) pairs or Outputs; a pair's flag counts as typed when it is
    among `typed` (argparse destinations; None: every flag named was typed, a tool's required ones), and takes
    a folder (DIR) when it is among `dir_flags`, else a FILE."""
    spelled = None if typed is None else {flag_spelling(d) for d in typed}
    return [i if isinstance(i, Output) else
            Output(None, Path(i)) if not isinstance(i, tuple) else
            Output(i[0], Path(i[1]), spelled is None or i[0] in spelled, "DIR" if i[0] in dir_flags else "FILE")
            for i in items]


def _changed(path):
    """What an existing file that no run or tool of this project wrote (written_by None) is, for a message:
    changed since the run or tool its folder's record names wrote it (where the record is believable:
    runs/sources.py), or simply not the project's."""
    e = read_record(path.parent).get(path.name)
    if e is None or e["run"] is None or not believable(e):
        return "holds a file this project did not write (or one changed since it did), which would be lost"
    who = f"run {e['run']}" if e["file"] else e["run"]  # a run's file is a copy of one in its folder
    return f"was changed since {who} wrote it, and the changes would be lost"


def check_replace(name, path, backup=None, elsewhere="name another path"):
    """The rule for an existing file at `path` (named `name` in messages) that a command would replace: fine
    when this project wrote it and it is unchanged; a project file never; anything else only with --backup
    (`backup` True; None where the command offers no --backup). `elsewhere`: how the message offers to write
    elsewhere (Output.elsewhere)."""
    path = Path(path)
    if path.name in COURSE_FILES:  # data wherever it lies: the next run would take the output for an input
        raise MinbertError(f"{name}: is named like a course data file ({path.name}), which no command "
                           "writes, --backup or not: name another file (predictions go under predictions/)")
    check_output(path, name)
    if not path.is_file() or written_by(path) is not None:
        return
    if in_project(path):
        raise MinbertError(f"{name}: is one of the project's own files (code, docs or course data), which no "
                           "command replaces: name a file under predictions/ or outside the project")
    if not backup:
        raise MinbertError(f"{name}: {_changed(path)}: move it or {elsewhere}"
                           + (f", or add --backup to keep it as {path.name}.DATE.bak" if backup is False
                              else ""))


def check_file(path, flag, inputs=()):
    """A tool's single output file (--json, --out): one line when it may not be written (check_outputs'
    rules), or when it holds a run's file, copied from its run folder (a published prediction file): that is
    replaced by a run's publishing only, never by a tool's table or timings."""
    if Path(path).is_file() and first_line(path) == ",".join(RESULTS_TABLE):
        raise MinbertError(f"{flag} {path}: the results table Part 2's runs append their rows to, which no tool "
                           "replaces: name another file")
    check_outputs(files=[(flag, path)], inputs=inputs)
    wrote = written_by(path) if Path(path).is_file() else None
    if wrote is not None and wrote["file"]:
        raise MinbertError(f"{flag} {path}: holds run {wrote['run']}'s {wrote['file']}, copied from "
                           f"{wrote['dir']}, which only a run's publishing replaces: name another path")


def check_outputs(dirs=(), files=(), inputs=(), own=None, backup=None, tables=(), typed=None):
    """Fail before training, not after it, when an output cannot or must not be written:
      - a folder that is a file, a file that is a folder, or a parent that is a file;
      - two outputs naming one file, or one inside the other's file;
      - an output that is one of the run's `inputs` ([(what, path)]: data files, a checkpoint it reads);
      - an output inside another run's folder (a folder holding `.minbert-run` other than `own`, this run's);
      - a folder of outputs inside this run's folder (it may be that folder), or holding it, or holding course
        data files;
      - an existing file the rule does not let it replace (check_replace; `backup` as there).
    `dirs`, `files` and `tables` (files rows are appended to, which replace nothing: check_table) are
    paths, (flag, path) pairs or Outputs; a message names the output after its flag where that was typed
    (`typed`: argparse destinations, None: every flag named was), else by its path (_named). A publishing
    into one of these folders that an interruption cut short is finished first (runs/publishing.py), so
    that its files are the project's again."""
    own = Path(os.path.abspath(own)) if own is not None else None
    seen = []
    dir_flags = {d[0] for d in dirs if isinstance(d, tuple)}
    named = [(d, True) for d in _named(dirs, typed, dir_flags)]
    named += [(f, False) for f in _named([*files, *tables], typed, dir_flags)]
    appended = {str(t.path) for t in _named(tables)}
    for out, want_dir in named:
        path, name = out.path, out.name
        too_long(path)
        if path.exists() and path.is_dir() != want_dir or want_dir and path.is_symlink() and not path.exists():
            raise MinbertError(f"{name}: is {what_is_there(path)}, but the run writes a {'folder' if want_dir else 'file'} "
                               f"there; move it or {out.elsewhere}")
        for parent in path.parents:
            if parent.exists() and not parent.is_dir():
                raise MinbertError(f"{parent}: is a file, but the run writes {path} inside it; "
                                   f"move it or {out.elsewhere}")
        if want_dir and among_sources(path):
            raise MinbertError(f"{name}: among the project's code, docs or data, where no command writes: "
                               "name a path under predictions/ or outside the project")
        data = next((n for n in sorted(COURSE_FILES) if want_dir and (path / n).is_file()), None)
        if data is not None:  # a data folder is read, not written into (nor zipped from)
            raise MinbertError(f"{name}: holds the course's data files ({data}, ...), which runs read; outputs go "
                               f"into a folder of their own: {out.elsewhere}")
        if want_dir and own is not None:  # the folder files are published to, and the run's own: apart (or
            here = Path(os.path.abspath(path))  # one: a sweep's trial keeps its files in its run folder)
            if own in here.parents:
                raise MinbertError(f"{name}: inside this run's folder {own}, which holds its files already "
                                   f"(the published copies go outside it): {out.elsewhere}")
            if here in own.parents:
                raise MinbertError(f"{name}: holds this run's folder {own}; a run folder never lies in a folder "
                                   "of published files: name another folder for one of them")
        where = path if want_dir else path.parent
        check_writable(where, name)
        if where.is_dir():
            check_record(where)
            finish_publishing([where])
        if want_dir:
            continue
        check_output(path, name, append=str(path) in appended)
        if path.name == SOURCES:
            raise MinbertError(f"{name}: the name of the record the project keeps in each folder it writes "
                               "into (which files it wrote there): name another file")
        for what, other in inputs:
            if same_file(path, other):
                raise MinbertError(f"{name}: is {what}, which this run reads; "
                                   "writing there would destroy it: name another file")
        for other_name, other in seen:
            if same_file(path, other):
                raise MinbertError(f"{name}: {other_name} names the same file; each output needs its own")
        for other in named:  # a file another output would have to be a folder for (found only when publishing)
            if Path(os.path.abspath(path)) in Path(os.path.abspath(other[0].path)).parents:
                raise MinbertError(f"{other[0].name}: inside the file {name} writes; name another path for "
                                   "one of them")
        seen.append((name, path))
        folder = run_folder_of(path.parent)
        if folder is not None and folder != own:
            raise MinbertError(f"{name}: inside {folder}, the folder of another run, whose files belong to "
                               "its checkpoint and log: name a path outside it")
        if str(path) in appended:
            check_table_name(name, path)
        elif folder is None or folder != own:
            check_replace(name, path, backup, out.elsewhere)


def check_table_name(name, path):
    """A table rows are appended to is never named like a course data file."""
    if Path(path).name in COURSE_FILES:
        raise MinbertError(f"{name}: is named like a course data file ({Path(path).name}), which no command "
                           "writes: name another file")


def first_line(path):
    """The first line of a text file, stripped (and of a byte-order mark)."""
    with open(path, encoding="utf-8", errors="replace", newline="") as fp:
        return fp.readline().strip().lstrip("\ufeff")


def check_table(path, fields, flag, typed=True):
    """A table rows are appended to (--results; `typed`: whether the user typed the flag, else `path` is its
    default): refused in one line when the file there is another table."""
    out = Output(flag, Path(path), typed, "FILE")
    if out.path.is_file() and out.path.stat().st_size:
        first = first_line(out.path)
        if first != ",".join(fields):
            raise MinbertError(f"{out.name}: not a results table of this script (its first line is "
                               f"{first[:60]!r}), so rows appended to it would garble it: move it or "
                               f"{out.elsewhere}")
