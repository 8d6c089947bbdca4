"""One CSV row per trained model from run logs (the epoch protocol's schema): the raw rows of RESULTS.md.

    python tools/collect_logs.py runs/reg-p1-* --out benchmarks/cpu-avx2-regularizers-p1.csv

Each row: the run, the pipeline and model, the best epoch and its dev score and metrics, every epoch's dev
score, the training minutes (the log's seconds, summed) and the last epoch's loss terms.
"""
import csv
import sys
from pathlib import Path

if not __package__:  # run as a file (python tools/NAME.py): the project folder first, not tools/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from minbert.runs.folders import pipeline_of  # noqa: E402
from minbert.runs.lock import a_run_of  # noqa: E402
from minbert.runs.logs import read_log  # noqa: E402
from minbert.runs.outputs import check_file  # noqa: E402
from minbert.runs.publishing import write_output  # noqa: E402
from utils import MinbertError, Parser, main_guard  # noqa: E402

FIELDS = ["run", "pipeline", "model", "epochs", "best_epoch", "dev_score", "dev", "dev_scores",
          "train_minutes", "loss_terms"]


def rows(folder):
    for log in sorted(Path(folder).glob("*-log.jsonl")):
        records = [r for r in read_log(log) if r["epoch"] >= 0]
        if not records:
            continue
        best = max(records, key=lambda r: r["dev_score"])
        yield {"run": records[-1]["run"], "pipeline": records[-1]["pipeline"], "model": records[-1]["model"],
               "epochs": len(records), "best_epoch": best["epoch"], "dev_score": f"{best['dev_score']:.4f}",
               "dev": " ".join(f"{k}={v:.4f}" for k, v in best["dev"].items() if isinstance(v, (int, float))),
               "dev_scores": " ".join(f"{r['dev_score']:.4f}" for r in records),
               "train_minutes": f"{sum(r['seconds'] for r in records) / 60:.1f}",
               "loss_terms": " ".join(f"{k}={v:.4g}" for k, v in records[-1]["loss_terms"].items())}


def main(argv=None):
    ap = Parser(prog="tools/collect_logs.py", description=__doc__)
    ap.add_argument("runs", nargs="+", help="run folders")
    ap.add_argument("--out", required=True, help="the CSV to write")
    args = ap.parse_args(argv)
    check_file(args.out, "--out")
    seen = set()
    for folder in map(Path, args.runs):  # every folder checked before any row is written
        if folder.resolve() in seen:
            raise MinbertError(f"{folder}: given twice; each run's rows are written once")
        seen.add(folder.resolve())
        if not folder.is_dir():
            raise MinbertError(f"{folder}: " + ("a file; give the run folder it lies in" if folder.exists()
                                               else "no such run folder"))
        if not any(folder.glob("*-log.jsonl")):
            wrote = pipeline_of(folder)
            raise MinbertError(f"{folder}: no run log (*-log.jsonl) in it: " + (
                "not a run folder" if wrote is None else f"the folder of {a_run_of(wrote)}, which logged no epoch"))
    table = []
    for folder in args.runs:
        found = list(rows(folder))
        if not found:
            print(f"note: {folder}: no epoch logged yet (the run stopped before its first), so no row")
        table += found
    if not table:
        raise MinbertError("no epoch logged in any of these run folders")

    def write(fp):
        w = csv.DictWriter(fp, FIELDS)
        w.writeheader()
        w.writerows(table)
    write_output(args.out, write, "tools/collect_logs.py", mode="w")
    print(f"{len(table)} rows written to {args.out}")


if __name__ == "__main__":
    main_guard(main)
