"""What a sweep's winner is worth (sweep.py, at the end): the best of N trials on the dev set is biased
upward, since it was picked for a dev score that is partly noise (the winner's curse; the more trials, the
larger), so the sweep says so and prints the commands that re-run the winner on fresh seeds and compare those
runs; with --baseline, the winning trial's own runs are compared with the baseline's at once (report.py
--compare's tests, reports/compare.py)."""
import shlex

from minbert.cli import MinbertError
from minbert.reports.compare import CompareSettings, compare
from minbert.reports.dev_outputs import read_run
from minbert.reports.seeds import check_one_configuration, differences, read_group
from minbert.runs.folders import pipeline_of
from minbert.runs.lock import a_run_of
from minbert.sweeps.space import as_argv
from minbert.sweeps.trials import PIPELINES

FRESH = 3  # seeds the winner is re-run on: what ASO needs per side


def check_baseline(folders, data_dir, pipeline):
    """--baseline's run folders, read before any trial runs (their dev outputs against the trials' --data_dir):
    a missing folder, one without dev outputs, one of another pipeline's runs than the sweep's trials, or runs
    that are not one configuration over seeds is one line now, not after the sweep."""
    if not folders:
        return
    group = read_group(folders, "--baseline", data_dir)
    for run in group.runs:
        wrote = pipeline_of(run.folder)
        if wrote not in (None, pipeline):  # (None: an ensemble's folder, or an earlier minbert's run)
            raise MinbertError(f"--baseline {run.folder}: the folder of {a_run_of(wrote)}, and this sweep's trials "
                               f"are {PIPELINES[pipeline].name} runs: give baseline runs of the same script")
    check_one_configuration(group)


def fresh_seeds(used, count=FRESH):
    """The first `count` seeds from 1 up that the sweep did not use."""
    seeds, s = [], 1
    while len(seeds) < count:
        if s not in used:
            seeds.append(s)
        s += 1
    return seeds


def rerun_commands(pipeline, base, params, study, used_seeds, baseline=()):
    """The command lines that re-run the winner on fresh seeds, then the comparison to run on them."""
    name = study.replace("/", "-")
    runs = [shlex.join(["python", PIPELINES[pipeline].name, *base, *as_argv(params), "--seed", str(s),
                        "--run_name", f"{name}-best-s{s}"]) for s in fresh_seeds(used_seeds)]
    # the globs stay unquoted, for the shell to expand as typed (a quoted one names no folder)
    against = [shlex.quote(b) for b in baseline] or ["runs/BASELINE-s*"]
    runs.append(" ".join(["python report.py --compare --baseline", *against, "--candidate",
                          f"runs/{shlex.quote(name)}-best-s*"]))
    return runs


def judge_winner(best, settings, trials, study, data_dir):
    """After the ranked table: the warning and the re-run commands, and with --baseline the winner's runs
    compared with the baseline's. Returns the comparison's rows, or None."""
    if trials > 1:
        print(f"note: the best of {trials} trials on the dev set is biased upward: it was picked for a dev "
              "score that is partly noise. Re-run it on fresh seeds and compare those runs with the "
              "baseline's:")
        for line in rerun_commands(settings.pipeline, settings.base, best.params, study, settings.seeds,
                                   settings.baseline):
            print(f"  {line}")
    if not settings.baseline:
        return None
    folders = best.user_attrs.get("folders")
    if not folders:
        print(f"trial {best.number} recorded no run folders (a study begun by an earlier minbert): compare "
              "it with report.py --compare")
        return None
    print(f"trial {best.number} (seeds {' '.join(map(str, settings.seeds))}) against --baseline, on the dev set it "
          "was picked on:")
    ours, theirs = read_run(folders[0], data_dir).flags(), read_run(settings.baseline[0], data_dir).flags()
    if ours and theirs:  # beyond what the sweep searched, a difference is part of what the comparison measures
        diff = differences(theirs, ours, ignore={flag.replace("-", "_") for flag in best.params})
        if diff:
            print(f"note: the baseline's runs and trial {best.number}'s differ beyond the searched flags too "
                  f"({'; '.join(diff[:4])}{'; ...' if len(diff) > 4 else ''}): the comparison measures those as well")
    one_each = len(settings.baseline) == 1 and len(folders) == 1
    chosen = (CompareSettings(runs=(settings.baseline[0], folders[0]), data_dir=data_dir) if one_each
              else CompareSettings(baseline=tuple(settings.baseline), candidates=(tuple(folders),),
                                   data_dir=data_dir))
    return compare(chosen)[0]
