"""Zip the code and predictions for Gradescope: cs224n_default_final_project_submission.zip holds every
top-level *.py file, the minbert/ package the scripts import, and predictions/*, nothing else (unzipped into an
empty folder, the code runs). Refuses, naming them, if required prediction files
are missing or empty, or if a file's ids are not exactly those of the split it belongs to (a run on a
subset of the data, or another split's file under this name).

    python prepare_submit.py            # Part 1 and/or Part 2, whichever predictions are there
    python prepare_submit.py --part 1   # insist on the eight Part 1 files
"""
import zipfile
from pathlib import Path

from evaluation import read_predictions
from minbert.course_data import data_file, read_examples
from minbert.files import atomic_write
from utils import MinbertError, Parser, main_guard

ZIP_NAME = "cs224n_default_final_project_submission.zip"
PART1 = [f"{m}-{d}-{s}-out.csv" for m in ("full-model", "last-linear-layer") for d in ("sst", "cfimdb")
         for s in ("dev", "test")]
PART2 = [f"{t}-{s}-output.csv" for t in ("sst", "para", "sts") for s in ("dev", "test")]
PART1_CODE = ["bert.py", "classifier.py", "optimizer.py"]


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
    preds, duplicated = read_predictions(path)
    missing = [i for i in ids if i not in preds]
    unknown = [i for i in preds if i not in set(ids)]
    if missing or unknown or duplicated:
        parts = [f"{len(preds)} ids where {gold.name} has {len(ids)}"]
        parts += [f"{len(missing)} missing (e.g. {missing[0]})"] if missing else []
        parts += [f"{len(unknown)} not in {split} (e.g. {unknown[0]})"] if unknown else []
        parts += [f"{len(duplicated)} repeated"] if duplicated else []
        return ", ".join(parts)
    return None


def problems_with(root, names, data_dir):
    bad = []
    for n in names:
        p = root / "predictions" / n
        if not p.is_file():
            bad.append(f"predictions/{n} (missing)")
        elif len(p.read_text().strip().splitlines()) < 2:
            bad.append(f"predictions/{n} (empty)")
        elif (why := id_problem(p, data_dir)) is not None:
            bad.append(f"predictions/{n} ({why})")
    return bad


def build(root=".", part="auto", out=None, data_dir=None):
    root = Path(root)
    data_dir = Path(data_dir) if data_dir else root / "data"
    parts = {"1": PART1, "2": PART2}
    if part == "auto":
        chosen = [k for k, names in parts.items() if any((root / "predictions" / n).exists() for n in names)]
        if not chosen:
            raise MinbertError(f"no prediction files in {root / 'predictions'}: run classifier.py (Part 1) "
                               f"or multitask_classifier.py (Part 2) first")
    else:
        chosen = [part]
    bad = [b for k in chosen for b in problems_with(root, parts[k], data_dir)]
    bad += [f"{c} (missing)" for c in PART1_CODE if "1" in chosen and not (root / c).is_file()]
    if bad:
        raise MinbertError(f"not zipping, Part {' and '.join(chosen)} needs: " + ", ".join(bad))
    files = sorted(root.glob("*.py")) + sorted(p for p in (root / "minbert").rglob("*.py")) + sorted(
        p for p in (root / "predictions").iterdir()
        # raw dev scores, and dated backups of files no run wrote (minbert/runs/outputs.py), are not for the zip
        if p.is_file() and not p.name.startswith(".") and p.suffix not in (".npz", ".bak"))
    out = Path(out) if out else root / ZIP_NAME

    def write(fp):
        with zipfile.ZipFile(fp, "w", zipfile.ZIP_DEFLATED) as z:
            for p in files:
                z.write(p, p.relative_to(root).as_posix())
    atomic_write(out, write)
    print(f"wrote {out} with {len(files)} files (Part {' and '.join(chosen)}; every prediction file's ids checked "
          f"against {data_dir})")
    return out


def build_parser():
    ap = Parser(prog="prepare_submit.py", description=__doc__)
    ap.add_argument("--part", choices=["auto", "1", "2"], default="auto",
                    help="which part's files must be there (auto: whichever part has predictions)")
    ap.add_argument("--root", default=None, help="the project folder to zip (default: where prepare_submit.py is)")
    ap.add_argument("--data_dir", default=None, help="the course CSVs the ids are checked against (default: ROOT/data)")
    return ap


def main():
    args = build_parser().parse_args()
    if args.root and not Path(args.root).is_dir():
        raise MinbertError(f"--root {args.root}: " + ("is a file; give the project folder" if Path(args.root).exists()
                                                      else "no such folder"))
    build(args.root or Path(__file__).resolve().parent, args.part, data_dir=args.data_dir)


if __name__ == "__main__":
    main_guard(main)
