"""The rows of a comparison (report.py --compare): one per task and candidate, B - A with its interval and
p, judged together (Holm-Bonferroni over all rows) and put in words, then the Markdown table a student pastes
into a report."""
import math
from dataclasses import dataclass

from minbert.reports.dev_outputs import METRICS
from minbert.reports.significance import format_p, holm, signed, verdict

# The multitask mean, (SST acc + Quora acc + (STS r + 1) / 2) / 3, as a weighted sum of the three differences.
MEAN_WEIGHTS = {"sst": 1 / 3, "quora": 1 / 3, "sts": 1 / 6}
NAMES = {**{t: name for t, (name, _) in METRICS.items()}, "mean": "multitask mean"}
ORDER = ["sst", "cfimdb", "quora", "sts", "mean", "sonnets"]


def digits(task):
    """Decimals shown: chrF is on 0-100, the rest on 0-1."""
    return 2 if task == "sonnets" else 3


@dataclass
class Row:
    """One comparison: candidate - baseline on one task."""
    task: str
    baseline: str       # who A is, and its score as shown
    candidate: str
    a: str
    b: str
    diff: float
    interval: tuple
    p: float            # the test's p, before Holm
    seeds: str = ""     # groups: what the seed-level test says
    order: str = ""     # groups: ASO's call, "better", "worse" or "within noise" ("" where it could not run)
    p_holm: float = float("nan")
    verdict: str = ""

    @property
    def digits(self):
        """The task's decimals, and up to three more where the difference or an end of its interval would
        otherwise read as 0 (a "worse" beside "+0.000" reads as a contradiction)."""
        shown = digits(self.task)
        while shown < digits(self.task) + 3 and any(x != 0 and round(abs(x), shown) == 0
                                                    for x in (self.diff, *self.interval)):
            shown += 1
        return shown


def check_resamples(count, resamples, alpha, least=1, log=print):
    """Say, before the work, when --resamples is too few for any of `count` rows to be called significant: a
    resampled p is at least least / (1 + resamples) (1 for the permutation test, 2 for the two-sided bootstrap),
    and a row needs a Holm-adjusted p below alpha (count times its own). The intervals are still worth a look,
    so it runs on."""
    if least * count / (1 + resamples) >= alpha:
        need = math.floor(least * count / alpha)  # the least R with least * count / (1 + R) < alpha
        log(f"note: --resamples {resamples}: its smallest p, {least}/{1 + resamples}, is not below Holm's threshold "
            f"for {count} rows at --alpha {alpha:g}, so no row can be called better or worse here: give "
            f"--resamples {need} or more for a verdict")


def judge(rows, alpha):
    """Holm-Bonferroni over every row's p, then each row's verdict in words. Over seeds a row is "better" or
    "worse" only where both tests say so: ASO over the seeds' scores and the pooled bootstrap over dev
    examples (a difference must stand out from the seeds' spread and from the dev set's sampling noise); else
    the row says what each found."""
    for row, p in zip(rows, holm([r.p for r in rows])):
        row.p_holm = p
        words = verdict(row.diff, p, row.interval, alpha, row.digits)
        if not row.seeds or row.order == words:
            row.verdict = words
        else:
            row.verdict = f"{row.order or 'untested'} over seeds; dev set: {words}"
    return rows


def multitask_mean(run):
    return sum(w * run.tasks[t].value for t, w in MEAN_WEIGHTS.items()) + 1 / 6


def row_order(names):
    """Rows by candidate in the order given, then by task in ORDER."""
    index = {n: i for i, n in enumerate(names)}
    return lambda r: (index.get(r.candidate, 0), ORDER.index(r.task))


def table(rows, groups=False):
    """The Markdown table a student pastes into a report."""
    head = ["task", "baseline (A)", "candidate (B)", "A", "B", "B - A", "95% CI", "p (Holm)"]
    head += ["seeds"] if groups else []
    lines = ["| " + " | ".join(head + ["verdict"]) + " |", "|" + "---|" * (len(head) + 1)]
    for r in rows:
        cells = [NAMES[r.task], r.baseline, r.candidate, r.a, r.b, signed(r.diff, r.digits),
                 f"{signed(r.interval[0], r.digits)} to {signed(r.interval[1], r.digits)}",
                 f"{format_p(r.p_holm)} ({format_p(r.p)})"] + ([r.seeds] if groups else []) + [r.verdict]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return lines
