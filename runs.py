"""Run folders: no run destroys another's results.

Every training run writes its checkpoints, per-epoch log and prediction files into a folder of its own,
`runs/NAME/` (NAME: `--run_name`, by default the script and a timestamp). The handout's paths
(`predictions/*.csv`, what `prepare_submit.py` zips) then get a copy of the files of the run just
finished, and one line says which run's files they replaced; those stay in that run's folder.
`predictions/.sources.json` remembers which run each published file came from.
"""
import json
import time
from pathlib import Path

from utils import MinbertError, atomic_write

RUNS_ROOT = Path("runs")
SOURCES = ".sources.json"


def new_run_name(prefix):
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}"


def open_run(args, prefix, root=RUNS_ROOT, resumable=lambda d: True):
    """The run folder for `args` (sets args.run_name). A new run gets a new folder; an existing folder is
    refused unless the run resumes it. `--resume` without `--run_name` takes the newest resumable run."""
    root = Path(root)
    if getattr(args, "resume", False) and not args.run_name:
        found = sorted((d for d in root.glob("*") if d.is_dir() and resumable(d)),
                       key=lambda d: d.stat().st_mtime)
        if not found:
            raise MinbertError(f"--resume: no {prefix} run to resume in {root}/ (give --run_name NAME)")
        args.run_name = found[-1].name
        return found[-1]
    if not args.run_name:
        args.run_name = new_run_name(prefix)
        n = 2
        while (root / args.run_name).exists():  # two runs started in the same second
            args.run_name = f"{new_run_name(prefix)}-{n}"
            n += 1
    folder = root / args.run_name
    if folder.exists() and any(folder.iterdir()) and not getattr(args, "resume", False):
        raise MinbertError(f"--run_name {args.run_name}: {folder} already holds a run; choose another name, "
                           f"or add --resume to continue it")
    return folder


def run_folder(args, prefix, explicit=None, resumable=lambda d: True):
    """The folder a run writes into: an explicit folder the user named is used as it is (as before run
    folders existed); otherwise a new (or resumed) one under runs/ from open_run."""
    if explicit:
        args.run_name = args.run_name or Path(explicit).name
        return Path(explicit)
    return open_run(args, prefix, resumable=resumable)


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
