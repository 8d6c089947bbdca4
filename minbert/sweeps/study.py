"""The sweep loop (sweep.py): this worker's share of a study, trial by trial, until the study holds --trials
finished ones; every trial appended to runs/sweeps/STUDY/trials.csv; at the end a ranked table (mean and
spread over seeds) and the winning command line."""
import contextlib
import shlex
import statistics
import time
import warnings
from pathlib import Path

import optuna

from minbert.cli import MinbertError, set_interrupt_hint
from minbert.files import deferred_interrupt
from minbert.runs import outputs
from minbert.runs.folders import check_run_name
from minbert.sweeps.space import as_argv, check_flags, parse_space, space_size, suggest, trial_flags
from minbert.sweeps.storage import (WORKER, check_same_space, check_same_study, duplicate_of, fail_unstarted,
                                    finished, open_storage,
                                    reclaim_dead_workers, requeue_interrupted, running_elsewhere)
from minbert.sweeps.trials import PIPELINES, TrialFailed, run_trial
from minbert.sweeps.winner import check_baseline, judge_winner

SWEEPS = Path("runs") / "sweeps"  # each study's database, trial folders and trials.csv


FIELDS = ["trial", "state", "params", "seeds", "scores", "mean", "std", "minutes", "worker", "note"]


def append_row(path, row):
    outputs.append_row(path, FIELDS, row)  # never half a row: a Ctrl-C waits for it


def make_sampler(settings, space, study):
    if settings.sampler == "grid":
        return optuna.samplers.GridSampler({f: v for f, (_, v) in space.items()})
    # A fixed seed would replay the same suggestions every time a worker starts (after a restart, or in
    # a second worker); --sampler_seed makes one worker's suggestions repeatable, shifted by the study's size.
    seed = settings.sampler_seed
    shifted = None if seed is None else (seed + len(study.get_trials(deepcopy=False))) % 2 ** 32
    return optuna.samplers.TPESampler(seed=shifted)


def sweep(settings):
    """Run this worker's share of the study (a specs.SweepSettings); returns summarize's result."""
    base, command = list(settings.base), list(settings.command)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    space = parse_space(settings.space)
    if not space:
        raise MinbertError("--space: give at least one FLAG=SPEC")
    if settings.sampler == "grid" and any(kind != "choice" for kind, _ in space.values()):
        raise MinbertError("--sampler grid takes comma lists only (e.g. "
                           "lr=1e-5,3e-5); ranges need --sampler tpe")
    check_flags(settings.pipeline, base, space)
    data_dir = trial_flags(settings.pipeline, base).data_dir  # the trials' (a --baseline is read against it)
    check_baseline(settings.baseline, data_dir, settings.pipeline)
    study_name = check_run_name(settings.study, "--study", SWEEPS) if settings.study else f"{settings.pipeline}-sweep"
    folder = SWEEPS / study_name
    storage = open_storage(settings.storage, folder.parent / f"{folder.name}.db")  # --study a/b: runs/sweeps/a/b.db
    pruner = (optuna.pruners.MedianPruner(n_startup_trials=settings.prune_startup, n_warmup_steps=settings.prune_warmup)
              if settings.prune else optuna.pruners.NopPruner())
    optuna.logging.set_verbosity(optuna.logging.ERROR)  # our own one line per trial, not Optuna's tracebacks
    try:
        study = optuna.create_study(study_name=study_name, storage=storage, pruner=pruner,
                                    direction="maximize", load_if_exists=True)
    except Exception as e:
        raise MinbertError(f"study {study_name}: cannot create or load it "
                           f"({str(e).splitlines()[0][:300]})") from None
    check_same_space(study, space, " ".join(settings.space))
    check_same_study(study, settings.pipeline, base, settings.seeds)
    study.sampler = make_sampler(settings, space, study)
    folder.mkdir(parents=True, exist_ok=True)
    csv_path = folder / "trials.csv"
    reclaim_dead_workers(study)
    optuna.storages.fail_stale_trials(study)
    wanted = min(settings.trials, space_size(space))
    cut = f" (the space's {wanted} configurations, of --trials {settings.trials})" if wanted < settings.trials else ""
    print(f"study {study_name} in {storage.url}: {len(finished(study))} trial(s) finished before, wanting "
          f"{wanted}{cut}; worker {WORKER}; trials logged to {csv_path}")
    seeds = " ".join(map(str, settings.seeds))
    # From the moment a trial's end is known (its seeds ran, it failed, or it was pruned) to Optuna's record of
    # it (the callback after each trial), a Ctrl-C waits: a trial whose seeds all ran is never turned into a
    # failed one to run again, nor its row written without its record.
    holding = contextlib.ExitStack()

    def hold():
        holding.enter_context(deferred_interrupt())  # (twice in one trial nests: the outer block decides)

    def objective(trial):
        values = suggest(trial, space)
        trial.set_user_attr("worker", WORKER)
        trial.set_user_attr("interrupted", False)  # a queued retry carries its original's attributes
        t0 = time.perf_counter()
        row = {"trial": trial.number, "params": " ".join(as_argv(values)), "seeds": seeds, "worker": WORKER}
        minutes = lambda: f"{(time.perf_counter() - t0) / 60:.1f}"  # noqa: E731
        twin = duplicate_of(study, trial, values)
        if twin is not None:
            trial.set_user_attr("duplicate_of", twin)
            print(f"trial {trial.number}: same flags as trial {twin}, which is evaluated once; skipped")
            raise optuna.TrialPruned()
        print(f"trial {trial.number}: {' '.join(as_argv(values))} (seeds {seeds})")

        pruned = []
        # the last seed's last epoch: the trial's work is done there, and a trial that ran it whole is complete
        last = 1000 * (len(settings.seeds) - 1) + trial_flags(settings.pipeline, base + as_argv(values)).epochs - 1

        def report(step, score):
            trial.report(score, step)
            if step < last and trial.should_prune():
                pruned.append((step, score))
                raise optuna.TrialPruned()  # run_trial stops the seed's process on its way out
        try:
            scores, folders = run_trial(settings.pipeline, base, values, settings.seeds, folder, trial.number, report)
        except optuna.TrialPruned:
            hold()
            step, score = pruned[-1]
            append_row(csv_path, {**row, "state": "pruned", "mean": score, "minutes": minutes()})
            print(f"trial {trial.number}: pruned after epoch {step % 1000} of seed "
                  f"{settings.seeds[step // 1000]} (dev score {score:.4f})")
            raise
        except TrialFailed as e:
            hold()
            trial.set_user_attr("error", str(e))
            append_row(csv_path, {**row, "state": "failed", "minutes": minutes(), "note": str(e)})
            print(f"trial {trial.number} failed: {e}")
            return float("nan")  # Optuna records it as failed; the sweep goes on
        except KeyboardInterrupt:
            trial.set_user_attr("interrupted", True)
            raise
        hold()
        mean = statistics.fmean(scores)
        # one seed has no spread to measure: the cell stays empty, not 0
        std = f"{statistics.stdev(scores):.4f}" if len(scores) > 1 else ""
        trial.set_user_attr("scores", scores)
        trial.set_user_attr("folders", [str(f) for f in folders])  # what --baseline compares the winner with
        append_row(csv_path, {**row, "state": "complete", "scores": " ".join(f"{s:.4f}" for s in scores),
                              "mean": f"{mean:.4f}", "std": std, "minutes": minutes()})
        print(f"trial {trial.number}: mean dev score {mean:.4f} over seeds {seeds}")
        return mean

    duplicates, before = 0, len(study.get_trials(deepcopy=False))
    # what holds until the handler below says more (a Ctrl-C that reaches the command another way, say)
    set_interrupt_hint(f"the trials finished so far are recorded in {storage.url}; continue the sweep with: "
                       f"{shlex.join(['python', 'sweep.py', *command])}")
    try:
        while len(finished(study)) + running_elsewhere(study) < wanted and duplicates < 20:
            before = len(study.get_trials(deepcopy=False))
            try:
                study.optimize(objective, n_trials=1, catch=(), callbacks=[lambda *_: holding.close()])
            finally:
                holding.close()  # (an error before the callback: Ctrl-C is Python's again)
            last = study.get_trials(deepcopy=False)[before:]
            duplicates = duplicates + 1 if last and all("duplicate_of" in t.user_attrs for t in last) else 0
    except KeyboardInterrupt:
        with deferred_interrupt():  # a second Ctrl-C waits for the record and the line to be right
            fail_unstarted(study, before)
            stopped = ("this worker's trial was stopped and is queued to run again" if requeue_interrupted(study)
                       else "the trials this worker finished are recorded")
            set_interrupt_hint(f"{stopped}; continue the sweep "
                               f"with: {shlex.join(['python', 'sweep.py', *command])}")
        raise
    set_interrupt_hint(f"the study's trials are recorded in {storage.url}; the same command prints its table "
                       "again (and runs any trial still wanted)")
    return summarize(study, settings, data_dir)


def summarize(study, settings, data_dir):
    """The ranked table of the study's complete trials and the winning command line."""
    base = list(settings.base)
    S = optuna.trial.TrialState
    trials = study.get_trials(deepcopy=False)
    complete = [t for t in trials if t.state == S.COMPLETE]
    failed = [t for t in trials if t.state == S.FAIL and "error" in t.user_attrs]
    pruned = [t for t in trials if t.state == S.PRUNED and "duplicate_of" not in t.user_attrs]
    print(f"study {study.study_name}: {len(complete)} complete, "
          f"{len(pruned)} pruned, {len(failed)} failed on their flags")
    for t in failed:
        print(f"  trial {t.number} failed: {t.user_attrs['error']}")
    if not complete:
        print("no complete trial yet")
        return None
    rows = sorted(complete, key=lambda t: -t.value)
    print(f"{'rank':<5} {'trial':<6} {'mean':<8} {'spread':<8} flags")
    for i, t in enumerate(rows, start=1):
        scores = t.user_attrs.get("scores", [t.value])
        spread = f"{statistics.stdev(scores):.4f}" if len(scores) > 1 else "n/a"  # (one seed: nothing to spread)
        print(f"{i:<5} {t.number:<6} {t.value:<8.4f} {spread:<8} {' '.join(as_argv(t.params))}")
    best = rows[0]
    seeds = settings.seeds
    command = " ".join(shlex.quote(a) for a in ["python", PIPELINES[settings.pipeline].name, *base,
                                                *as_argv(best.params), "--seed", str(seeds[0])])
    print(f"best: trial {best.number}, mean dev score {best.value:.4f} over seeds {' '.join(map(str, seeds))}")
    print(f"winning command{f' (its first seed; --seed {seeds[1]}, ... for the others)' if len(seeds) > 1 else ''}: "
          f"{command}")
    judged = judge_winner(best, settings, len(complete), study.study_name, data_dir)
    return {"best_value": best.value, "best_params": best.params, "command": command, "trials": len(complete),
            "against_baseline": judged}
