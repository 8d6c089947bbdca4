"""See a run: learning curves, per-task diagnostics and an error sample, as PNGs and a report.md.

    python report.py runs/multitask-20261123-014501 [runs/OTHER ...] --out reports/NAME
    python report.py runs/NAME/multitask.pt           # a checkpoint: its run's log and scores
    python report.py runs/NAME/full-model-sst-log.jsonl
    python report.py --results predictions/multitask-results.csv [--out reports/results]

A run is read from the per-epoch JSON-lines log the pipelines write and, for the diagnostics, from the
`*-dev-scores.npz` files beside it (raw dev outputs; they stay in the run folder and never go into the
submission zip). Several runs given together are overlaid in the learning curves. Figures use the Agg
backend: no window ever opens. The code: minbert/reports/.
"""
from pathlib import Path

from minbert.flags.groups import add_backup_flag
from minbert.reports.report import report, results_view
from utils import MinbertError, Parser, main_guard


def build_parser():
    ap = Parser(prog="report.py", description=__doc__)
    ap.add_argument("runs", nargs="*", metavar="CHECKPOINT_OR_LOG", help="run folders, checkpoints or logs")
    ap.add_argument("--results", metavar="CSV", help="rank every run of a results table and chart it")
    ap.add_argument("--out", default=None, help="output folder (default: reports/NAME of the first run, or "
                                                "reports/results)")
    add_backup_flag(ap)
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    if not args.runs and not args.results:
        raise MinbertError("report.py: give run folders, checkpoints or logs, or --results CSV")
    if args.results:
        results_view(args.results, args.out or "reports/results", args.backup)
    if args.runs:
        first = Path(args.runs[0])
        default = first.name if first.is_dir() else first.parent.name
        return report(args.runs, args.out or Path("reports") / default, args.backup)


if __name__ == "__main__":
    main_guard(main)
