"""The submission zip (prepare_submit.py, gpt2/prepare_submit.py): cs224n_default_final_project_submission.zip
holds the project's code (every top-level *.py file and the packages the scripts import) and the prediction
files the handout lists for the part (or parts) submitted, nothing else, so that unzipped into an empty folder
the code runs; one line names what else the predictions folder holds, left out. It refuses, naming them,
required prediction files that are missing or empty, or whose ids are not exactly those of their split (a run
on a subset of the data, or another split's file under this name); a generated-sonnets file must complete
every held-out sonnet.

Which run each file came from is judged by its bytes (runs/sources.py `origins`: the folder's record, or a
run folder holding the same file) and said, one line per run. Files one model writes together (Part 2's six,
a Part 1 model's dev and test file) that come from different runs, or partly from no run found, are a mix: it
is refused, naming the files of each run and the command that copies one run's set back from its run folder
(`--publish RUN_DIR`), unless --mixed asks for it. A zip already there that this project did not write (or one
changed since) is never replaced without a word: one line, or with --backup it is kept as a dated backup
(runs/outputs.py's rule)."""
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path

from minbert.cli import MinbertError
from minbert.course_data import data_file, read_examples
from minbert.files import file_digest, first_repeated, read_text, special_file
from minbert.project_paths import OUTPUT_FOLDERS, check_output, project_parts
from minbert.runs.lock import RUN_MARK, a_run_of, read_mark
from minbert.runs.outputs import check_outputs
from minbert.runs.publishing import backup_line, finish_publishing, keep_as_backup, publish, write_output
from minbert.runs.sources import check_record, origins, read_record, run_folders, written_by
from minbert.scoring import read_predictions

ZIP_NAME = "cs224n_default_final_project_submission.zip"
PART1 = [f"{m}-{d}-{s}-out.csv" for m in ("full-model", "last-linear-layer") for d in ("sst", "cfimdb")
         for s in ("dev", "test")]
PART2 = [f"{t}-{s}-output.csv" for t in ("sst", "para", "sts") for s in ("dev", "test")]
PART1_CODE = ["bert.py", "classifier.py", "optimizer.py"]


@dataclass(frozen=True)
class Project:
    """What one default project's zip holds and checks."""
    name: str
    predictions: str      # its prediction files' folder, relative to the project folder
    parts: dict           # part -> the prediction files it needs
    code: dict            # part -> the code files the handout lists
    packages: tuple       # folders whose *.py files go in with the top-level ones
    first: str            # what to run when there are no predictions yet
    # file suffix -> check(path, data_dir) -> why the file is wrong, or None (default: ids)
    checks: dict = None
    checked: str = "the ids of its split"  # what the checks check, as the closing line says it
    references: tuple = ()  # data files beside the code that its own checks read (optimizer_test.npy)
    # part -> the groups of its files one model writes together, which must come from one run
    units: dict = None
    script: str = "prepare_submit.py"  # its command, relative to the project folder
    pipelines: tuple = ()  # the pipelines whose run folders --publish takes (runs/lock.py SCRIPTS' keys)


MINBERT = Project("minBERT", "predictions", {"1": PART1, "2": PART2}, {"1": PART1_CODE}, ("minbert",),
                  "run classifier.py (Part 1) or multitask_classifier.py (Part 2) first",
                  references=("optimizer_test.npy",),
                  units={"1": [tuple(PART1[i:i + 2]) for i in range(0, len(PART1), 2)], "2": [tuple(PART2)]},
                  pipelines=("classifier", "multitask", "eval", "ensemble"))


def split_of(name):
    """(task, split) a leaderboard file's name says it holds."""
    parts = name.rsplit("-out", 1)[0].split("-")  # ...-sst-dev-out.csv, para-dev-output.csv
    task, split = parts[-2], parts[-1]
    return {"para": "quora"}.get(task, task), split


def id_problem(path, data_dir):
    """Why the ids in prediction file `path` are not those of its split, or None. The course CSV of the split
    is the reference; without it the check is refused rather than skipped."""
    task, split = split_of(path.name)
    gold = data_file(data_dir, task, split)
    if not gold.is_file():
        raise MinbertError(f"{gold}: not found, so the ids of {path} cannot be checked (pass --data_dir)")
    ids = [e.id for e in read_examples(gold, task, split, log=lambda *_: None)]
    preds, duplicated = read_predictions(path, task)
    missing = [i for i in ids if i not in preds]
    unknown = [i for i in preds if i not in set(ids)]
    if missing or unknown or duplicated:
        parts = [f"{len(preds)} ids where {gold.name} has {len(ids)}"]
        parts += [f"{len(missing)} missing (e.g. {missing[0]})"] if missing else []
        parts += [f"{len(unknown)} not in {split} (e.g. {unknown[0]})"] if unknown else []
        parts += [f"{len(duplicated)} repeated"] if duplicated else []
        return ", ".join(parts)
    return None


def _lines(path):
    """The lines of a prediction file, or None when it is not UTF-8 text (binary bytes)."""
    try:
        return read_text(path, "prediction file").strip().splitlines()
    except MinbertError:
        return None


def problems_with(root, names, data_dir, folder="predictions", checks=None, instead=None):
    """What the zip would refuse in `names` of root/folder; `instead` ({name: path}) checks a file from
    elsewhere in a name's place (a run's, which --publish is about to copy there)."""
    bad = []
    for n in names:
        p = (instead or {}).get(n, root / folder / n)
        label = f"{folder}/{n}" if p == root / folder / n else str(p)
        if p.is_symlink() or p.exists() and not p.is_file():
            bad.append(f"{label} ({'a link' if p.is_symlink() else special_file(p) or 'a folder'}, "
                       "where the zip takes a regular file; put the file itself there)")
        elif not p.is_file():
            bad.append(f"{label} (missing)")
        elif (lines := _lines(p)) is None:
            bad.append(f"{label} (not text: binary bytes where "
                       "its script writes UTF-8 lines; run it again)")
        elif len(lines) < 2:
            bad.append(f"{label} (empty)")
        elif (why := (checks or {}).get(p.suffix, id_problem)(p, data_dir)) is not None:
            bad.append(f"{label} ({why})")
    return bad


def zip_problems(root, chosen, data_dir, project, instead=None):
    """What the zip would refuse for the Parts `chosen`: their prediction files (problems_with, `instead` as
    there) and their code files."""
    bad = [b for k in chosen for b in problems_with(root, project.parts[k], data_dir, project.predictions,
                                                    project.checks, instead)]
    return bad + [f"{c} (missing)" for k in chosen for c in project.code.get(k, []) if not (root / c).is_file()]


def check_zip(out, backup, by):
    """One line when `out` holds a file (a zip of the user's, say) that this project did not write, or that
    changed since it did, or the other default project's zip (both handouts name the same file), unless
    --backup keeps it; `by` is who writes the new one. Returns whether the other project's zip is to be kept
    as a backup (done by the caller once nothing can refuse the new zip any more)."""
    if out.is_dir():
        raise MinbertError(f"{out}: is a folder, where the submission zip goes; move it")
    check_output(out, str(out))
    check_record(out.parent)
    if not out.is_file():
        return
    wrote = written_by(out)
    if wrote is None and not backup:
        raise MinbertError(f"{out}: a file this project did not write (or one changed since it did), which "
                           "the new zip would replace: move it, or add "
                           f"--backup to keep it as {out.name}.DATE.bak")
    if wrote is not None and wrote.get("run") != by:
        if not backup:
            raise MinbertError(f"{out}: the zip {wrote.get('run')} wrote, which this one ({by}) would "
                               f"replace: move it, or add --backup to keep it as {out.name}.DATE.bak")
        return True  # kept as a backup once every check has passed, right before the new zip is written
    return False


def left_out_line(predictions, zipped, chosen):
    """The one line naming what the predictions folder holds besides the files zipped (empty when nothing)."""
    rest = sorted(p.name for p in predictions.iterdir() if not p.name.startswith(".") and p not in zipped)
    if not rest:
        return ""
    shown = ", ".join(rest[:6]) + (f" and {len(rest) - 6} more" if len(rest) > 6 else "")
    return (f"left out of the zip, as not among the files the handout lists for Part {' and '.join(chosen)}: "
            f"{shown} (in {predictions})")


def shown(path):
    """A path as a command line the user types gives it: relative to here when it lies below, else whole."""
    path = Path(os.path.abspath(path))
    return path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path


def _unit_runs(names, found):
    """The run folders every file of a unit (`names`) may come from (`found`: {name: origins})."""
    dirs = [{o["dir"] for o in found[n]} for n in names]
    return set.intersection(*dirs) if dirs else set()


def provenance(predictions, names, units):
    """([line per run: which files came from it], [line per unit whose files come from different runs, or
    partly from none found], the newest run folder among the units' files or None), judged by content."""
    entries = read_record(predictions)
    runs = run_folders([e["dir"] for e in entries.values()] + [(e.get("was") or {}).get("dir") for e in
                                                               entries.values()], predictions)
    found = {n: origins(predictions / n, entries, runs) for n in names}
    chosen, mixes = {}, []
    for unit in units:
        common = _unit_runs(unit, found)
        for n in unit:
            first = next((o for o in found[n] if o["dir"] in common), found[n][0] if found[n] else None)
            chosen[n] = (first["run"], first["dir"]) if first else None
        if not common and any(found[n] for n in unit):
            parts = {}
            for n in unit:
                parts.setdefault(chosen[n], []).append(n)
            mixes.append("; ".join(f"{', '.join(ns)} from " + (f"run {k[0]} ({k[1] or 'a tool'})" if k else
                                                              "no run found (changed by hand?)")
                                   for k, ns in parts.items()))
    by_run = {}
    for n in names:
        by_run.setdefault(chosen[n], []).append(n)
    nowhere = ("from no run this project can find (its folder gone, or the file written elsewhere or changed "
               "by hand)")
    lines = [(f"from run {k[0]} ({k[1]})" if k else nowhere) + f": {', '.join(ns)}"
             for k, ns in by_run.items()]
    dirs = [Path(k[1]) for k in by_run if k and (Path(k[1]) / RUN_MARK).is_file()]
    newest = max(dirs, key=lambda d: (d / RUN_MARK).stat().st_mtime, default=None)
    return lines, mixes, newest


def recorded_digests(folder):
    """{file: sha256} of the files the run of `folder` recorded when it finished (runs/folders.py note_outputs);
    a file it recorded nothing of (an earlier minbert's run) is absent."""
    outputs = read_mark(folder).get("outputs")
    return {name: digest for done in (outputs.values() if isinstance(outputs, dict) else ()) if isinstance(done, dict)
            for name, digest in (done.get("files") or {}).items() if isinstance(digest, str)}


def check_root(root):
    """--root: one line unless it is a folder (a file, a pipe or nothing there each said so)."""
    if not Path(root).is_dir():
        what = special_file(root) or ("a file" if Path(root).exists() else "no such folder")
        raise MinbertError(f"--root {root}: {what}; give the project folder")


def check_run_to_publish(folder, project):
    """One line unless `folder` is the folder of one of `project`'s runs (before its files are read as the
    zip's)."""
    folder = Path(folder)
    if not folder.is_dir():
        what = ("no such folder" if not folder.exists() and not folder.is_symlink()
                else special_file(folder) or "a file")
        raise MinbertError(f"--publish {folder}: {what}: give the folder of a finished run, e.g. runs/NAME")
    if not (folder / RUN_MARK).is_file():
        raise MinbertError(f"--publish {folder}: not a run folder (no {RUN_MARK} in it): give the folder "
                           "of a finished run, e.g. runs/NAME")
    wrote = read_mark(folder).get("pipeline")
    if project.pipelines and wrote is not None and wrote not in project.pipelines:  # (None: an earlier minbert's)
        raise MinbertError(f"--publish {folder}: the folder of {a_run_of(wrote)}, not of a {project.name} run; "
                           f"its files go into the other project's zip")


def publish_runs(folders, root, project, chosen, backup=False):
    """prepare_submit.py --publish: copy each run folder's leaderboard files (those of the parts `chosen`)
    to the handout's paths, as the run did when it finished (build has checked them as the zip will)."""
    predictions, plan, source = Path(root) / project.predictions, [], {}
    twice = first_repeated(folders)
    if twice is not None:
        raise MinbertError(f"--publish {twice}: given twice; each run is published once")
    for folder in map(Path, folders):  # every folder checked before any file is copied
        check_run_to_publish(folder, project)
        names = [n for k in chosen for n in project.parts[k] if (folder / n).is_file()]
        if not names:
            raise MinbertError(f"--publish {folder}: holds none of the files Part {' or '.join(chosen)} "
                               f"submits ({', '.join(project.parts[chosen[0]][:2])}, ...)")
        recorded = recorded_digests(folder)
        changed = next((n for n in names if n in recorded and recorded[n] != file_digest(folder / n)), None)
        if changed is not None:  # the zip would hold, under the run's name, a file no run wrote
            raise MinbertError(f"--publish {folder}: {changed} has changed since run {folder.name} wrote it (its "
                               "record holds another sha256): the zip would hold what no run wrote; the same "
                               "training command plus --resume writes the run's files again from its best "
                               "checkpoint")
        held = next((n for n in names if n in source), None)
        if held is not None:  # the second would replace the first's file at once
            raise MinbertError(f"--publish {source[held]} {folder}: both hold {held}; each submitted file comes "
                               "from one run (publish a Part 1 run and a Part 2 run together, not two of a part)")
        source.update({n: folder for n in names})
        plan.append((folder, names))
    for folder, names in plan:
        pairs = [(folder / n, predictions / n) for n in names]
        check_outputs(files=[("--publish", d) for _, d in pairs], backup=backup)
        publish(pairs, folder.name, folder)


def build(root=".", part="auto", out=None, data_dir=None, project=MINBERT, backup=False, mixed=False,
          runs=()):
    root = Path(root)
    data_dir = Path(data_dir) if data_dir else root / "data"
    predictions = root / project.predictions
    out = Path(out) if out else root / ZIP_NAME
    by = f"prepare_submit.py ({project.name})"
    keep_other_zip = check_zip(out, backup, by)
    if runs:
        parts = list(project.parts) if part == "auto" else [part]
        for folder in runs:  # a folder that is no run is said to be one, before its files are checked as the zip's
            check_run_to_publish(folder, project)
        # the zip's checks on the files as they will be once the runs' are copied, before any is: a refused
        # command changes nothing in the predictions folder
        instead = {n: Path(f) / n for f in runs for k in parts for n in project.parts[k] if (Path(f) / n).is_file()}
        chosen = [k for k in parts if any(n in instead or (predictions / n).exists() for n in project.parts[k])]
        bad = zip_problems(root, chosen, data_dir, project, instead)
        if bad and instead:
            raise MinbertError(f"not publishing or zipping, {project.name} Part {' and '.join(chosen)} would "
                               "then need: " + ", ".join(bad))
        publish_runs(runs, root, project, parts, backup)
    if predictions.is_dir():  # a run's publishing cut short is finished before its files are read
        check_record(predictions, replace=False)  # (written only where a publishing was cut short)
        finish_publishing([predictions])
    if part == "auto":
        chosen = [k for k, names in project.parts.items() if any((predictions / n).exists() for n in names)]
        if not chosen:
            needs = "; ".join(f"Part {k} needs {', '.join(names)}" for k, names in project.parts.items())
            raise MinbertError(f"no prediction files in {predictions} ({needs}): {project.first}")
    else:
        chosen = [part]
    bad = zip_problems(root, chosen, data_dir, project)
    if bad:
        raise MinbertError(f"not zipping, {project.name} Part "
                           f"{' and '.join(chosen)} needs: " + ", ".join(bad))
    listed = [predictions / n for k in chosen for n in project.parts[k]]
    units = [u for k in chosen for u in (project.units or {}).get(k, [tuple(project.parts[k])])]
    lines, mixes, newest = provenance(predictions, [p.name for p in listed], units)
    if mixes and not mixed:
        fix = (f"python {shown(root / project.script)} --part {'/'.join(chosen)} --publish {shown(newest)}"
               if newest else "no run folder holds them any more: train or rescore a run again, and its set "
               "is published whole")
        raise MinbertError(f"not zipping a mix of runs in {predictions}: " + " | ".join(mixes) + ". To "
                           f"submit one run's files, copy its set back from its run folder ({fix}); to zip "
                           "the files as they are, add --mixed")
    # not gpt2/runs/__init__.py's guard
    code = [p for pkg in project.packages for p in (root / pkg).rglob("*.py")
            if project_parts(p.relative_to(root).parts)[0] not in OUTPUT_FOLDERS]
    # the project's own references go with the code, so that optimizer_test.py runs where the zip is unpacked
    references = [root / n for n in project.references if (root / n).is_file()]
    files = sorted(root.glob("*.py")) + sorted(code) + references + listed

    def write(fp):
        with zipfile.ZipFile(fp, "w", zipfile.ZIP_DEFLATED) as z:
            for p in files:
                z.write(p, p.relative_to(root).as_posix())
    if keep_other_zip:
        print(backup_line(keep_as_backup(out)))
    write_output(out, write, by)
    print(f"wrote {out} with {len(files)} files (Part {' and '.join(chosen)}: the code and the {len(listed)} "
          f"prediction files the handout lists, each checked against {data_dir}: {project.checked})")
    for line in lines:
        print(line)
    if mixes:
        print("zipped as they are (--mixed): " + " | ".join(mixes))
    line = left_out_line(predictions, set(listed), chosen)
    if line:
        print(line)
    return out
