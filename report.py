"""See a run: learning curves, per-task diagnostics and an error sample, as PNGs and a report.md; or compare
runs: is B better than A, or is the difference noise?

    python report.py runs/multitask-20261123-014501 [runs/OTHER ...] --out reports/NAME
    python report.py runs/NAME/multitask.pt           # a checkpoint: its run's log and scores
    python report.py runs/NAME/full-model-sst-log.jsonl
    python report.py --results predictions/multitask-results.csv [--out reports/results]
    python report.py --compare runs/A runs/B [runs/C ...]                  # B (and C) against A, per dev set
    python report.py --compare --baseline runs/a-* --candidate runs/b-* [--candidate runs/c-* ...]
    python report.py --compare --handout --candidate runs/p1-full-*        # against the handout's means

A run is read from the per-epoch JSON-lines log the pipelines write and, for the diagnostics, from the
`*-dev-scores.npz` files beside it (raw dev outputs; they stay in the run folder and never go into the
submission zip). Several runs given together are overlaid in the learning curves. Figures use the Agg
backend: no window ever opens.

--compare reads the runs' dev outputs (those files, else the dev prediction files, or a sonnet run's dev
completions) and, per dev set, gives B - A with a 95% interval from the paired bootstrap and a p from the
paired permutation test; over seeds, mean ± std per group, Almost Stochastic Order and the bootstrap with the
seeds pooled; Holm-Bonferroni over all rows; a verdict per row ("better", "worse", "within noise (p = ...,
95% CI ...)"), printed as a Markdown table and written with a figure into --out (default: a new
reports/compare-TIMESTAMP; never a run's folder). Which test for which metric: docs/statistics.md. The code:
minbert/reports/.
"""
import sys
from pathlib import Path

from minbert.cli import MinbertError, Parser, main_guard
from minbert.flags.groups import add_backup_flag
from minbert.flags.typed import check_idle_flags, parse_flags
from minbert.flags.types import resamples, seed, share
from minbert.reports.compare import CompareSettings, compare
from minbert.reports.report import report, results_view


def build_parser():
    ap = Parser(prog="report.py", description=__doc__)
    ap.add_argument("runs", nargs="*", metavar="CHECKPOINT_OR_LOG", help="run folders, checkpoints or logs "
                                                                          "(--compare: run folders, A first)")
    ap.add_argument("--results", metavar="CSV", help="rank every run of a results table and chart it")
    ap.add_argument("--out", default=None, help="output folder (default: reports/NAME of the first run, "
                                                "reports/results, or a new reports/compare-TIMESTAMP)")
    add_backup_flag(ap)
    ap.add_argument("--compare", action="store_true",
                    help="is B better than A? runs compared on their dev outputs, with intervals and tests")
    ap.add_argument("--baseline", nargs="+", metavar="RUN", help="--compare over seeds: the baseline's run "
                                                                 "folders, one per seed")
    ap.add_argument("--candidate", nargs="+", action="append", metavar="RUN",
                    help="--compare over seeds: a candidate's run folders, one per seed (repeat the flag for "
                         "several candidates)")
    ap.add_argument("--handout", action="store_true",
                    help="--compare: each --candidate (Part 1 runs) against the handout's published means "
                         "over 10 seeds")
    ap.add_argument("--resamples", type=resamples, default=CompareSettings.resamples,
                    help="--compare: bootstrap resamples and permutations")
    ap.add_argument("--alpha", type=share, default=CompareSettings.alpha,
                    help="--compare: the significance level, over all rows together (Holm-Bonferroni)")
    ap.add_argument("--seed", type=seed, default=CompareSettings.seed, help="--compare: the resamples' seed")
    ap.add_argument("--data_dir", default=CompareSettings.data_dir,
                    help="--compare: the course's dev CSVs, for runs that keep only their prediction files")
    return ap


# Flags that act only with others (minbert/flags/typed.py check_idle_flags).
COMPARE_ONLY = {f: (lambda flags, typed: flags["compare"], "belongs to --compare")
                for f in ("baseline", "candidate", "handout", "resamples", "alpha", "seed", "data_dir")}


def main(argv=None):
    args = parse_flags(build_parser(), argv)
    check_idle_flags(vars(args), args.typed, COMPARE_ONLY)
    if args.compare:
        return compare(compare_settings(args, argv))
    if not args.runs and not args.results:
        raise MinbertError("report.py: give run folders, checkpoints or logs, or --results CSV")
    given = "out" in args.typed  # a message names --out only when it was typed
    if args.results:
        results_view(args.results, args.out or "reports/results", args.backup, given)
    if args.runs:
        first = Path(args.runs[0])
        default = first.name if first.is_dir() else first.parent.name
        return report(args.runs, args.out or Path("reports") / default, args.backup, given)


def compare_settings(args, argv):
    """CompareSettings of report.py's flags, the ways of asking for a comparison checked against each other."""
    if args.results:
        raise MinbertError("--results and --compare: one at a time (a results table ranks runs by their "
                           "means; --compare tests runs on their dev outputs)")
    groups = args.baseline or args.candidate
    if args.runs and args.handout and not groups:
        raise MinbertError(f"--compare --handout {' '.join(args.runs)}: --handout compares runs with the handout's "
                           "published means: give them as --candidate RUN...")
    if args.runs and (groups or args.handout):
        raise MinbertError(f"--compare {' '.join(args.runs)}: give either runs (RUN_A RUN_B) or groups "
                           "(--baseline RUN... --candidate RUN...), not both")
    if args.handout and args.baseline:
        raise MinbertError("--handout is the baseline (its published means): drop --baseline")
    if (args.baseline or args.handout) and not args.candidate:
        raise MinbertError(f"{'--baseline' if args.baseline else '--handout'} needs at least one --candidate "
                           "RUN... to compare with it")
    if args.candidate and not (args.baseline or args.handout):
        raise MinbertError("--candidate needs --baseline RUN... (or --handout) to compare with")
    if not args.runs and not groups:
        raise MinbertError("report.py --compare: give two runs (RUN_A RUN_B), or groups of runs over seeds "
                           "(--baseline RUN... --candidate RUN...)")
    if "data_dir" in args.typed and not Path(args.data_dir).is_dir():  # typed, it is meant: said before any run
        raise MinbertError(f"--data_dir {args.data_dir}: no such folder (the course's dev CSVs, for runs that keep "
                           "only their prediction files)")
    command = list(sys.argv[1:] if argv is None else argv)
    return CompareSettings(runs=tuple(args.runs), baseline=tuple(args.baseline or ()),
                           candidates=tuple(tuple(c) for c in args.candidate or ()), handout=args.handout,
                           out=args.out, resamples=args.resamples, alpha=args.alpha, seed=args.seed,
                           data_dir=args.data_dir, backup=args.backup, command=tuple(command))


if __name__ == "__main__":
    main_guard(main)
