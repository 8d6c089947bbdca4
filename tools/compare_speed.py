"""report.py --compare's statistics, timed on synthetic dev outputs of Quora's size: three tasks (5-class
accuracy as SST, 2-class accuracy as Quora, Pearson r as STS) of --examples examples each, two systems.

    python tools/compare_speed.py --examples 3000 --resamples 10000 --repeats 3 [--scipy] [--json OUT]

Rows: `two runs` is what `report.py --compare A B` computes (per task the paired bootstrap and the paired
permutation test, --resamples each, then the multitask mean); `over seeds` the bootstrap with three runs a
side pooled (`--baseline ... --candidate ...`, ASO's few seeds aside); with --scipy, scipy.stats.bootstrap
(paired, percentile) on the Quora task alone, for scale. Each figure is the median of --repeats runs
after an untimed one."""
import json
import statistics
import sys
import timeit
from pathlib import Path

if not __package__:  # run as a file (python tools/NAME.py): the project folder first, not tools/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# first, before torch loads: a Ctrl-C meanwhile is one line (minbert/cli.py)
from minbert.cli import Parser, main_guard  # noqa: E402

import numpy as np  # noqa: E402
from scipy import stats  # noqa: E402

from minbert.reports.significance import (ACCURACY, PEARSON, accuracy_stats, combine, paired,  # noqa: E402
                                          pearson_stats, pooled)
from minbert.flags.types import positive_int, resamples  # noqa: E402
from minbert.runs.outputs import check_file  # noqa: E402
from minbert.runs.publishing import write_output  # noqa: E402


def system(n, skill, rng):
    """Per-example statistics of one synthetic system on the three tasks."""
    sst, quora, sts = np.arange(n) % 5, (np.arange(n) // 3) % 2, (np.arange(n) * 0.37) % 5
    right = rng.random((2, n)) < skill
    return {"sst": (ACCURACY, accuracy_stats(np.where(right[0], sst, (sst + 1) % 5), sst)),
            "quora": (ACCURACY, accuracy_stats(np.where(right[1], quora, 1 - quora), quora)),
            "sts": (PEARSON, pearson_stats(sts + rng.normal(0, 2.5 * (1 - skill), n), sts))}


def timed(fn, repeats):
    """(median seconds of `repeats` calls, the result of one call before them: a warm-up)."""
    out = fn()
    return statistics.median(timeit.repeat(fn, number=1, repeat=repeats)), out


def measure(examples, resamples, repeats, scipy_row=False, seed=0):
    rng = np.random.default_rng(seed)
    a, b = system(examples, 0.80, rng), system(examples, 0.82, rng)
    group_a = [system(examples, 0.80, rng) for _ in range(3)]
    group_b = [system(examples, 0.82, rng) for _ in range(3)]
    weights = {"sst": 1 / 3, "quora": 1 / 3, "sts": 1 / 6}

    def two_runs():
        g = np.random.default_rng(seed)
        parts = {t: paired(m, x, b[t][1], resamples, g) for t, (m, x) in a.items()}
        return combine([(w, parts[t]) for t, w in weights.items()])

    def over_seeds():
        g = np.random.default_rng(seed)
        parts = {t: pooled(m, [r[t][1] for r in group_a], [r[t][1] for r in group_b], resamples, g)
                 for t, (m, _) in a.items()}
        return combine([(w, parts[t]) for t, w in weights.items()])

    size = f"3 tasks x {examples} examples"
    rows = {f"two runs: bootstrap and permutation, {size}, {resamples} each": two_runs,
            f"over seeds: pooled bootstrap, 3 runs a side, {size}, {resamples} resamples": over_seeds}
    if scipy_row:
        x, y = a["quora"][1][:, 0], b["quora"][1][:, 0]
        rows[f"scipy.stats.bootstrap, Quora alone, {resamples} resamples"] = lambda: stats.bootstrap(
            (x, y), lambda p, q, axis: (q - p).mean(axis), paired=True, vectorized=True,
            n_resamples=resamples, method="percentile", rng=np.random.default_rng(seed))
    results = {}
    for name, fn in rows.items():
        seconds, out = timed(fn, repeats)
        results[name] = {"seconds": seconds}
        if hasattr(out, "interval"):
            results[name]["mean_interval"] = out.interval()
    return {"examples": examples, "resamples": resamples, "repeats": repeats, "rows": results}


def main(argv=None):
    ap = Parser(prog="tools/compare_speed.py", description=__doc__)
    ap.add_argument("--examples", type=positive_int, default=3000, help="dev examples per task")
    ap.add_argument("--resamples", type=resamples, default=10000)
    ap.add_argument("--repeats", type=positive_int, default=3)
    ap.add_argument("--scipy", action="store_true", help="also time scipy.stats.bootstrap on one task")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    if args.json:
        check_file(args.json, "--json")
    r = measure(args.examples, args.resamples, args.repeats, args.scipy)
    print(f"report.py --compare's statistics, median of {r['repeats']}:")
    for name, x in r["rows"].items():
        print(f"  {name}: {x['seconds']:.2f} s")
    if args.json:
        write_output(args.json, lambda fp: fp.write(json.dumps(r, indent=2) + "\n"), "tools/compare_speed.py",
                     mode="w")
    return r


if __name__ == "__main__":
    main_guard(main)
