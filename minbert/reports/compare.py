"""report.py --compare: is B better than A, or is the difference noise? Runs compared on their dev outputs
(dev_outputs.py) with the tests of significance.py, one row per task and candidate (verdicts.py), with
Holm-Bonferroni over all rows and a verdict in words, written as a Markdown table and a figure into a new
folder (never into a run's).

  - Two runs or more (`RUN_A RUN_B ...`, each after the first against the first; here): per dev set both
    have, the paired bootstrap interval of B - A and the paired permutation test's p; the multitask mean with
    each task's examples resampled within that task.
  - Groups over seeds (`--baseline RUNS --candidate RUNS ...`) and `--handout`: seeds.py.
"""
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np

from minbert.cli import MinbertError
from minbert.course_data import DATA_DIR, MULTITASK, TASKS, check_scorable
from minbert.reports.dev_outputs import METRICS, aligned, read_run
from minbert.reports.figures import plot_differences
from minbert.reports.report import OutFolder
from minbert.reports.verdicts import (MEAN_WEIGHTS, NAMES, Row, check_resamples, digits, judge, multitask_mean,
                                     row_order, table)
from minbert.reports.seeds import ASO_THRESHOLD, HANDOUT_SEEDS, compare_groups, compare_handout
from minbert.reports.significance import combine, paired
from minbert.runs.folders import new_run_name


@dataclass(frozen=True)
class CompareSettings:
    """report.py --compare's settings, built once from its flags: either two runs or more (the first is the
    baseline) or groups of runs over seeds, a baseline's and each candidate's. (They live beside their one
    consumer: minbert/specs.py holds the pipelines'.)"""
    runs: tuple = ()                     # RUN_A RUN_B ...: B (and each after it) against A
    baseline: tuple = ()                 # --baseline: one configuration's runs, one per seed
    candidates: tuple = ()               # --candidate (repeatable): a tuple of run folders each
    handout: bool = False                # each --candidate against the handout's published means (Part 1)
    out: Optional[str] = None            # where the table and figure go (default: a new reports/compare-...)
    resamples: int = 10000
    alpha: float = 0.05
    seed: int = 0                        # of the resamples: the same command gives the same intervals
    data_dir: str = DATA_DIR             # the course's dev CSVs, for runs keeping only prediction files
    backup: bool = False
    command: tuple = ()                  # report.py's own command line, written beside the table


def compare_runs(settings):
    """B - A (and C - A, ...) on every dev set both runs kept outputs for; returns the judged rows."""
    if len(settings.runs) < 2:
        raise MinbertError("report.py --compare: give two runs (RUN_A RUN_B: B is compared with A), or "
                           "groups of runs with --baseline RUN... --candidate RUN...")
    runs = [read_run(t, settings.data_dir) for t in settings.runs]
    base, rng = runs[0], np.random.default_rng(settings.seed)
    for run in runs[1:]:
        if run.folder.resolve() == base.folder.resolve():
            raise MinbertError(f"--compare {base.folder} {run.folder}: the same run folder twice; a run compared "
                               "with itself differs by nothing")
    commons = [[t for t in base.tasks if t in run.tasks] for run in runs[1:]]
    if all(commons):  # (else the loop below refuses the run without a dev set in common)
        check_resamples(sum(len(c) + all(t in c for t in MULTITASK) for c in commons), settings.resamples,
                        settings.alpha)
    rows = []
    for run, common in zip(runs[1:], commons):
        if not common:
            raise MinbertError(f"{run.folder}: no dev set in common with {base.folder} "
                               f"({', '.join(run.tasks)} against {', '.join(base.tasks)}): runs of different "
                               "tasks")
        one_side = [f"{METRICS[t][0].split()[0]} (only {r.name} has it)"
                    for r, other in ((base, run), (run, base)) for t in r.tasks if t not in other.tasks]
        if one_side:
            print(f"note: {run.name} against {base.name}: not compared: {', '.join(one_side)}")
        pairs = {t: (base.tasks[t], aligned(base.tasks[t], run.tasks[t])) for t in common}
        if all(np.array_equal(a.stats, b.stats) for a, b in pairs.values()):
            raise MinbertError(f"{run.folder}: the same dev outputs as {base.folder} on every example of "
                               f"{', '.join(common)} (a copy of that run?): B - A is 0 everywhere, which no test "
                               "can tell anything about")
        parts = {}
        for task in common:
            a, b = pairs[task]
            if task in TASKS:
                check_scorable(a.source, TASKS[task], list(a.gold))
            parts[task] = paired(a.metric, a.stats, b.stats, settings.resamples, rng)
            rows.append(paired_row(task, base.name, run.name, a.value, b.value, parts[task]))
        if all(t in parts for t in MULTITASK):
            mean = combine([(w, parts[t]) for t, w in MEAN_WEIGHTS.items()])
            rows.append(paired_row("mean", base.name, run.name, multitask_mean(base), multitask_mean(run),
                                   mean))
    return judge(sorted(rows, key=row_order([r.name for r in runs[1:]])), settings.alpha)


def paired_row(task, a_name, b_name, a, b, result):
    d = digits(task)
    return Row(task, a_name, b_name, f"{a:.{d}f}", f"{b:.{d}f}", result.observed, result.interval(), result.p)


def method(settings, rows, mode):
    k = len(rows)
    holm_line = (f"p (Holm): Holm-Bonferroni over the {k} rows (the test's own p in brackets); a row is "
                 f"\"better\" or \"worse\" where its adjusted p is below {settings.alpha:g}.")
    if mode == "runs":
        mean = (" The multitask mean is (SST + Quora + (STS r + 1) / 2) / 3, each task's examples resampled "
                "within that task." if any(r.task == "mean" for r in rows) else "")
        return [f"B - A per dev set. 95% CI: the paired bootstrap over dev examples (Koehn 2004), "
                f"{settings.resamples} resamples drawn the same for both runs, seed {settings.seed}. p: the "
                f"paired permutation test (approximate randomisation), {settings.resamples} random swaps of "
                f"the two runs' outputs per example.{mean}", holm_line]
    if mode == "handout":
        return [f"B - A against the handout's Part 1 reference (bert-base-uncased, mean ± std over "
                f"{HANDOUT_SEEDS} seeds): Welch's t-test and its 95% CI from the two groups' means, stds and "
                "seeds alone.", holm_line]
    return [f"A and B: mean ± std over each group's seeds; B - A: the difference of the means. seeds: "
            "Almost Stochastic Order over the per-seed scores (Dror et al. 2019, Ulmer et al. 2022) at "
            f"confidence 1 - {settings.alpha:g}/{k} (Bonferroni): B is ahead where ε_min (B over A) < "
            f"{ASO_THRESHOLD}, behind where ε_min (A over B) is. 95% CI and p: the bootstrap over dev "
            "examples with every run resampled on the same draw and the seeds pooled "
            f"({settings.resamples} resamples): it sees the dev set's sampling noise, not the seeds' spread. "
            "A row is \"better\" or \"worse\" where both say so; else it says what each found.", holm_line]


def fresh_out(out):
    """--out, or a new folder under reports/ that replaces nothing."""
    if out:
        return Path(out)
    path, n = Path("reports") / new_run_name("compare"), 2
    while path.exists():
        path, n = Path("reports") / f"{new_run_name('compare')}-{n}", n + 1
    return path


def compare(settings):
    """report.py --compare: the rows, printed as a Markdown table and written with their figure to --out."""
    out = OutFolder(fresh_out(settings.out), own=None, backup=settings.backup,  # checked before the work
                    given=bool(settings.out))
    if settings.handout:
        rows, mode = compare_handout(settings), "handout"
    elif settings.baseline:
        rows, mode = compare_groups(settings), "groups"
    else:
        rows, mode = compare_runs(settings), "runs"
    return write(rows, settings, mode, out)


def write(rows, settings, mode, out):
    lines = table(rows, groups=mode == "groups")
    notes = method(settings, rows, mode)
    command = shlex.join(["python", "report.py", *settings.command]) if settings.command else ""
    print("\n".join(lines))
    title = f"{rows[0].candidate} against {rows[0].baseline}" if len({r.candidate for r in rows}) == 1 else (
        f"{len({r.candidate for r in rows})} candidates against {rows[0].baseline}")
    figure = plot_differences(rows, NAMES, out.file("comparison.png"), title)
    md = [f"# Comparison: {title}", ""] + ([f"`{command}`", ""] if command else []) + lines + [""]
    md += [f"- {n}" for n in notes] + ["", f"![differences with their 95% intervals]({figure.name})", ""]
    out.file("comparison.md").write_text("\n".join(md))
    out.close()
    print("\n".join(notes))
    print(f"comparison written: {out.final('comparison.md')} and {out.final(figure)}")
    return rows, out.final("comparison.md")
