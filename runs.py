"""Run folders: no run destroys another's results.

Every training run writes its checkpoints, per-epoch log and prediction files into a folder of its own,
`runs/NAME/` (NAME: `--run_name`, by default the script and a timestamp). The handout's paths
(`predictions/*.csv`, what `prepare_submit.py` zips) then get a copy of the files of the run just
finished, and one line says which run's files they replaced; those stay in that run's folder.
`predictions/.sources.json` remembers which run each published file came from.
"""
import csv
import json
import time
from dataclasses import dataclass
from pathlib import Path

from utils import MinbertError, atomic_write

RUNS_ROOT = Path("runs")
SOURCES = ".sources.json"


def new_run_name(prefix):
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}"


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


@dataclass
class Run:
    """A run's name and folder; `files(stem)` names what one trained model writes there. `how` is the flag
    that names it again (for the --resume hint)."""
    name: str
    folder: Path
    how: str = ""

    def files(self, stem):
        return RunFiles(self.folder, stem)


def open_run(prefix, stems, run_name="", run_dir=None, resume=False, root=RUNS_ROOT):
    """The run folder a run writes into, refusing to write over another run's files.

    --run_dir DIR is that folder; otherwise runs/RUN_NAME (a new timestamped name by default). A folder
    already holding this pipeline's files (one of `stems`' log or checkpoints; any file when `stems` is
    None) is refused unless the run resumes it. --resume without a name takes the newest folder under `root` holding one of `stems`' runs."""
    flag = "--run_dir" if run_dir else "--run_name"
    if run_dir:
        folder = Path(run_dir)
    elif run_name:
        folder = Path(root) / run_name
    elif resume:
        found = sorted((d for d in Path(root).glob("*") if d.is_dir() and any(RunFiles(d, s).exist() for s in stems or ())),
                       key=lambda d: d.stat().st_mtime)
        if not found:
            raise MinbertError(f"--resume: no {prefix} run to resume in {root}/ (give --run_name NAME or --run_dir DIR)")
        folder = found[-1]
    else:
        name, n = new_run_name(prefix), 2
        while (Path(root) / name).exists():  # two runs started in the same second
            name, n = f"{new_run_name(prefix)}-{n}", n + 1
        folder = Path(root) / name
    if folder.exists() and not folder.is_dir():
        raise MinbertError(f"{flag} {folder}: is a file, but a run folder goes there; move it or pick another name")
    held = ([p for s in stems for p in RunFiles(folder, s).exist()] if stems is not None
            else sorted(folder.iterdir()) if folder.is_dir() else [])
    if held and not resume:
        raise MinbertError(f"{flag} {folder}: already holds a run ({held[0].name}); choose another"
                           + (", or add --resume to continue it" if stems is not None else ""))
    return Run(run_name or folder.name, folder, f"--run_dir {folder}" if run_dir else f"--run_name {folder.name}")


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


def check_outputs(dirs=(), files=()):
    """Fail before training, not after it, when an output cannot be written: a folder that is a file,
    a file that is a folder, or a parent that is a file."""
    for path, want_dir in [(Path(d), True) for d in dirs] + [(Path(f), False) for f in files]:
        if path.exists() and path.is_dir() != want_dir:
            raise MinbertError(f"{path}: is a {'file' if want_dir else 'folder'}, but the run writes a "
                               f"{'folder' if want_dir else 'file'} there; move it or pick another path")
        for parent in path.parents:
            if parent.exists() and not parent.is_dir():
                raise MinbertError(f"{parent}: is a file, but the run writes {path} inside it; "
                                   f"move it or pick another path")


def publish(pairs, run_name, run_dir, log=print):
    """Copy each (run file, published path) pair. The line it prints names the run whose published files
    were replaced and the folder where they still are."""
    replaced, dests = set(), []
    for src, dest in pairs:
        src, dest = Path(src), Path(dest)
        dests.append(dest)
        if src.resolve() == dest.resolve():  # published where the run wrote it: nothing to copy
            continue
        sources_file = dest.parent / SOURCES
        sources = _read_sources(sources_file)
        data = src.read_bytes()
        if dest.is_file() and dest.read_bytes() != data:
            old = sources.get(dest.name)
            replaced.add(f"run {old['run']} (still in {old['dir']})" if isinstance(old, dict)
                         else "an unrecorded earlier run")
        atomic_write(dest, lambda fp: fp.write(data))
        sources[dest.name] = {"run": run_name, "dir": str(run_dir)}
        atomic_write(sources_file, lambda fp: json.dump(sources, fp, indent=1, sort_keys=True), mode="w")
    if not dests:
        return ""
    line = f"run {run_name}'s predictions copied to " + ", ".join(str(d) for d in dests)
    if replaced:
        line += f", replacing those of {'; '.join(sorted(replaced))}"
    log(line)
    return line


def _read_sources(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}


# ----------------------------------------------------------------------------- reading a run's log

# The pipelines whose epoch logs share the one schema (trainer.fit writes them).
PIPELINES = ("classifier", "multitask", "pretrain")


def _legacy(rec):
    """A record of the earlier per-pipeline log formats, in the current schema."""
    if "dev_mean" in rec:
        return {**rec, "pipeline": "multitask", "dev_score": rec["dev_mean"]}
    if "dev_acc" in rec:
        return {**rec, "pipeline": "classifier", "dev_score": rec["dev_acc"],
                "dev": {"accuracy": rec["dev_acc"], "f1": rec.get("dev_f1"), "train_accuracy": rec.get("train_acc")}}
    if "masked_acc" in rec:
        return {**rec, "pipeline": "pretrain", "dev_score": rec["masked_acc"],
                "dev": {k: rec[k] for k in ("masked_acc", "masked_loss") if k in rec}}
    return rec


def read_text(path, what):
    try:
        return Path(path).read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise MinbertError(f"{path}: not a text file, so not a {what}") from None
    except IsADirectoryError:
        raise MinbertError(f"{path}: is a folder, not a {what}") from None


def read_log(path):
    path = Path(path)
    if not path.is_file():
        raise MinbertError(f"{path}: log not found")
    records = []
    for n, line in enumerate(read_text(path, "run log").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            raise MinbertError(f"{path}: line {n}: truncated or not JSON; the run was probably cut off while "
                               f"writing it: delete that line and report again") from None
        if isinstance(rec, dict) and "stopped" in rec:
            continue  # the line saying why the run stopped early
        rec = _legacy(rec) if isinstance(rec, dict) else rec
        if not isinstance(rec, dict) or "epoch" not in rec or "dev_score" not in rec or rec.get("pipeline") not in PIPELINES:
            raise MinbertError(f"{path}: line {n}: not a per-epoch record of classifier.py, multitask_classifier.py "
                               f"or pretrain.py")
        records.append(rec)
    if not records:
        raise MinbertError(f"{path}: the log is empty (no epoch finished)")
    return records
