"""report.py --compare over seeds: groups of runs, one configuration each, a run per seed. Mean ± std per
group; the seed-level test, Almost Stochastic Order, where each side has at least 3 seeds (else how many seeds
the observed spread asks for); beside it the bootstrap over dev examples with the seeds pooled. And a group of
Part 1 runs against the handout's published means over 10 seeds, from summary statistics (Welch)."""
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from minbert.cli import MinbertError, flag_spelling
from minbert.course_data import MULTITASK
from minbert.reports.dev_outputs import METRICS, aligned, read_run
from minbert.reports.verdicts import MEAN_WEIGHTS, Row, check_resamples, digits, judge, multitask_mean, row_order
from minbert.reports.significance import aso, bootstrap_p, combine, pooled, seeds_needed, welch
from minbert.runs.folders import pipeline_of, recorded_flags

ASO_MIN_SEEDS, ASO_THRESHOLD = 3, 0.2  # Ulmer et al. (2022): claim order only where epsilon_min < 0.2
# The handout's Part 1 reference, bert-base-uncased: (--fine-tune-mode, dataset) -> (dev accuracy mean, std).
HANDOUT = {("last-linear-layer", "sst"): (0.390, 0.007), ("last-linear-layer", "cfimdb"): (0.780, 0.002),
           ("full-model", "sst"): (0.515, 0.004), ("full-model", "cfimdb"): (0.966, 0.007)}
HANDOUT_SEEDS = 10
# The labelled examples of the course's dev sets, which the handout's figures were scored on.
HANDOUT_DEV = {"sst": 1101, "cfimdb": 245}


@dataclass
class Group:
    flag: str   # the flag that named it, for messages
    runs: list

    @property
    def name(self):
        """The runs' common prefix with a star (base-11711, base-42 -> base-*), else the first run's name."""
        names = [r.name for r in self.runs]
        if len(names) == 1:
            return names[0]
        prefix = names[0]
        for n in names[1:]:
            while not n.startswith(prefix):
                prefix = prefix[:-1]
        return prefix + "*" if prefix.rstrip("-_") else f"{names[0]} (+{len(names) - 1})"

    def values(self, task):
        return np.array([multitask_mean(r) if task == "mean" else r.tasks[task].value for r in self.runs])

    def tasks(self):
        """The tasks every run of the group has outputs for."""
        return [t for t in self.runs[0].tasks if all(t in r.tasks for r in self.runs)]


def read_group(folders, flag, data_dir):
    runs = [read_run(f, data_dir) for f in folders]
    seen = {}
    for r in runs:
        if r.folder.resolve() in seen:
            raise MinbertError(f"{flag}: {r.folder} is given twice")
        seen[r.folder.resolve()] = r
    return Group(flag, runs)


def left_out_because(task, a, b):
    """Why `task` is not compared between groups a and b: only one group trained it, or some run of a group
    kept no dev outputs for it."""
    has = [g for g in (a, b) if task in g.tasks()]
    if len(has) == 1 and not any(task in r.tasks for r in (b if has[0] is a else a).runs):
        return f"only {has[0].name} has it"
    short = [f"{sum(task not in r.tasks for r in g.runs)} of {len(g.runs)} runs of {g.name}"
             for g in (a, b) if task not in g.tasks()]
    return f"no dev outputs in {' and '.join(short)}"


def differences(a, b, ignore=()):
    """What differs between two runs' run-defining flags beyond the seed and the flags in `ignore` (input files
    by their contents)."""
    keys = sorted((set(a) | set(b)) - {"seed", "inputs", *ignore})
    diff = [f"{flag_spelling(k)} {a.get(k)!r} against {b.get(k)!r}" for k in keys if a.get(k) != b.get(k)]
    ia, ib = a.get("inputs") or {}, b.get("inputs") or {}
    diff += [f"{what}: other contents" if what in ia and what in ib else f"{what} read by one only"
             for what in sorted(set(ia) | set(ib))
             if (ia.get(what) or {}).get("sha256") != (ib.get(what) or {}).get("sha256")
             and not (what.startswith("--pretrained") and same_pretraining(ia.get(what), ib.get(what)))]
    return diff


def same_pretraining(a, b):
    """Whether two --pretrained files (their recorded {path, sha256}) come from folders pretrain.py wrote with
    one configuration, its seed aside: a group over seeds may pretrain each seed's checkpoint afresh
    (pretrain.py --seed S, then Part 2 from it), and those checkpoints then differ by the seed alone."""
    flags = [recorded_flags(Path(x["path"]).parent) if isinstance(x, dict) and x.get("path") else None
             for x in (a, b)]
    return all(f is not None for f in flags) and not differences(*flags)


def check_one_configuration(group):
    """A group over seeds repeats one configuration: its runs' recorded flags may differ in the seed alone,
    and each seed counts once. A run whose folder records no flags cannot be checked: one warning line says so."""
    known = [(r, r.flags()) for r in group.runs]
    unknown = [str(r.folder) for r, flags in known if flags is None]
    if unknown and len(known) > 1:
        print(f"warning: {group.flag}: {', '.join(unknown)} record{'s' if len(unknown) == 1 else ''} no flags "
              "(an ensemble's folder, or a run of an earlier minbert), so "
              f"{'its configuration' if len(unknown) == 1 else 'their configurations'} cannot be checked against "
              "the group's")
    known = [(r, f) for r, f in known if f is not None]
    for r, f in known[1:]:
        first, ff = known[0]
        diff = differences(ff, f)
        if diff:
            more = "; ..." if len(diff) > 3 else ""
            raise MinbertError(f"{group.flag}: {first.folder} and {r.folder} differ beyond the seed "
                               f"({'; '.join(diff[:3])}{more}): a group over seeds repeats one configuration")
    seeds = {}
    for r, f in known:
        if f.get("seed") in seeds:
            raise MinbertError(f"{group.flag}: {seeds[f['seed']].folder} and {r.folder} both ran seed "
                               f"{f['seed']}: a group over seeds takes each seed once")
        seeds[f.get("seed")] = r


def seed_level(a, b, alpha, resamples, rng):
    """(what the seed-level test says, its call: 'better', 'worse', 'within noise' or '' where it cannot
    run) for per-seed scores `a` (baseline) and `b`."""
    if min(len(a), len(b)) >= ASO_MIN_SEEDS:
        eps_b, eps_a = aso(b, a, alpha, resamples, rng), aso(a, b, alpha, resamples, rng)
        order = "better" if eps_b < ASO_THRESHOLD else "worse" if eps_a < ASO_THRESHOLD else "within noise"
        return f"ASO ε_min {eps_b:.2f} (B over A), {eps_a:.2f} (A over B)", order
    spread = np.std(np.concatenate([a - a.mean(), b - b.mean()]), ddof=2) if len(a) + len(b) > 2 else 0.0
    n = seeds_needed(float(b.mean() - a.mean()), float(spread), alpha)
    need = (f"about {n} seeds per side for this difference at the observed spread (std {spread:.3f})" if n
            else "no spread observed yet" if not spread > 0 else "the means are equal")
    return f"ASO needs ≥ {ASO_MIN_SEEDS} seeds per side: {need}", ""


def compare_groups(settings):
    """Each --candidate group against the --baseline group; returns the judged rows."""
    base = read_group(settings.baseline, "--baseline", settings.data_dir)
    candidates = [read_group(c, "--candidate", settings.data_dir) for c in settings.candidates]
    if len(base.runs) == 1 and all(len(c.runs) == 1 for c in candidates):
        raise MinbertError("--baseline and --candidate name one run each: a seed-level comparison needs at "
                           f"least 2 seeds per side ({ASO_MIN_SEEDS} for ASO); for two runs give report.py "
                           "--compare RUN_A RUN_B")
    seen = {}
    for g in (base, *candidates):  # a run in two groups would be compared with itself
        for r in g.runs:
            key = r.folder.resolve()
            if key in seen:
                raise MinbertError(f"{g.flag}: {r.folder} is in {seen[key]} too: each run belongs to one group "
                                   "(a group against itself is no comparison)")
            seen[key] = f"{g.flag} {g.name}"
    for g in (base, *candidates):
        check_one_configuration(g)
    rng = np.random.default_rng(settings.seed)
    plan = [(c, [t for t in base.tasks() if t in c.tasks()]) for c in candidates]
    for c, tasks in plan:
        if not tasks:
            raise MinbertError(f"--candidate {c.name}: no dev set in common with --baseline {base.name} "
                               f"({', '.join(c.tasks())} against {', '.join(base.tasks())}): runs of "
                               "different tasks")
        some = [t for t in METRICS if t not in tasks and any(t in r.tasks for r in base.runs + c.runs)]
        if some:
            print(f"note: {c.name} against {base.name}: not compared: "
                  + ", ".join(f"{METRICS[t][0].split()[0]} ({left_out_because(t, base, c)})" for t in some))
    count = sum(len(t) + all(x in t for x in MULTITASK) for _, t in plan)
    check_resamples(count, settings.resamples, settings.alpha, least=2)  # the pooled bootstrap's two-sided p
    rows, aso_alpha = [], settings.alpha / count
    for c, tasks in plan:
        parts = {}
        for task in tasks:
            ref = base.runs[0].tasks[task]
            runs_a = [aligned(ref, r.tasks[task]).stats for r in base.runs]
            runs_b = [aligned(ref, r.tasks[task]).stats for r in c.runs]
            parts[task] = pooled(ref.metric, runs_a, runs_b, settings.resamples, rng)
            rows.append(group_row(task, base, c, parts[task], aso_alpha, settings.resamples, rng))
        if all(t in parts for t in MULTITASK):
            mean = combine([(w, parts[t]) for t, w in MEAN_WEIGHTS.items()])
            rows.append(group_row("mean", base, c, mean, aso_alpha, settings.resamples, rng))
    return judge(sorted(rows, key=row_order([c.name for c in candidates])), settings.alpha)


def group_row(task, base, cand, result, aso_alpha, resamples, rng):
    a, b = base.values(task), cand.values(task)
    seeds, order = seed_level(a, b, aso_alpha, resamples, rng)
    return Row(task, base.name, cand.name, spread(a, task), spread(b, task), float(b.mean() - a.mean()),
               result.interval(), bootstrap_p(result.boot), seeds, order)


def spread(values, task):
    d = digits(task)
    std = f" ± {np.std(values, ddof=1):.{d}f}" if len(values) > 1 else ""
    return f"{values.mean():.{d}f}{std} ({len(values)} seed{'s' if len(values) > 1 else ''})"


# ----------------------------------------------------------------------------- the handout's published means

def compare_handout(settings):
    """Each --candidate group (Part 1 runs of one configuration) against the handout's reference for its
    --fine-tune-mode and dataset: bert-base-uncased's dev accuracy, mean and std over 10 seeds."""
    rows = []
    for folders in settings.candidates:
        group = read_group(folders, "--candidate", settings.data_dir)
        check_one_configuration(group)
        first = group.runs[0]
        kind = pipeline_of(first.folder)
        if kind not in (None, "classifier"):
            raise MinbertError(f"--handout: {first.folder} is a {kind} run; the handout publishes reference "
                               "figures over seeds for Part 1 alone (classifier.py: SST and CFIMDB)")
        if len(group.runs) < 2:
            raise MinbertError(f"--handout: --candidate {group.name} is one run: its spread over seeds is "
                               "unknown, and Welch's test needs at least 2 (the handout's are 10)")
        flags = first.flags() or {}
        mode = flags.get("fine_tune_mode")
        if mode is None:
            raise MinbertError(f"--handout: {first.folder} records no flags (an ensemble's "
                               "folder, or a run of an earlier minbert), so not the --fine-tune-mode that picks "
                               "the handout's reference row")
        local = any(k.startswith("--pretrained") for k in flags.get("inputs") or {})
        pretrained = "a local checkpoint" if local else flags.get("pretrained")
        if pretrained != "bert-base-uncased":
            print(f"note: the handout's figures are bert-base-uncased's; {group.name} fine-tuned "
                  f"{pretrained}")
        tasks = [t for t in group.tasks() if (mode, t) in HANDOUT]
        if not tasks:
            raise MinbertError(f"--handout: {group.name} has no SST or CFIMDB dev outputs to hold against "
                               "the handout's Part 1 figures")
        for task in tasks:
            mean, std = HANDOUT[mode, task]
            n = len(first.tasks[task].ids)
            if n != HANDOUT_DEV[task]:
                print(f"note: {group.name} was scored on {n} {task.upper()} dev examples, the handout's figures "
                      f"on the course's {HANDOUT_DEV[task]}: the comparison holds only as far as the two dev "
                      "sets are alike")
            b = group.values(task)
            if np.ptp(b) == 0:  # Welch's test would take the handout's spread alone and claim far too much
                raise MinbertError(f"--handout: --candidate {group.name}'s {len(b)} runs all score {b[0]:.4f} on "
                                   f"{task.upper()} dev: no spread over seeds (runs of one seed, or a dev set too "
                                   "small to tell them apart), so Welch's test has no variance of theirs to go "
                                   "on: give runs of different seeds")
            diff, interval, p = welch(mean, std, HANDOUT_SEEDS, b.mean(), np.std(b, ddof=1), len(b))
            reference = f"{mean:.3f} ± {std:.3f} ({HANDOUT_SEEDS} seeds)"
            rows.append(Row(task, f"handout, {mode}", group.name, reference, spread(b, task), diff, interval,
                            p))
    return judge(rows, settings.alpha)
