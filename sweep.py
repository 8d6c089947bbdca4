"""Hyperparameter search over either pipeline's flags, on Optuna.

    python sweep.py multitask --trials 8 --space lr=log:1e-5:2e-4 hidden_dropout_prob=0.1,0.3 \\
        --seeds 11711 42 -- --epochs 3 --pretrained all-minilm-l6-v2
    python sweep.py classifier --sampler grid --space lr=3e-5,5e-5,1e-4 scheduler=constant,linear \\
        -- --datasets sst --fine-tune-mode full-model --epochs 3 --pretrained all-minilm-l6-v2

--space takes FLAG=SPEC: `log:LO:HI` (log-uniform), `float:LO:HI`, `int:LO:HI`, or a comma list of
choices (the only kind the grid sampler takes). Flags after `--` are passed to every trial. Each trial
runs the pipeline's own main() in this process, once per seed, one after another, and scores the mean
over seeds of the dev score (Part 1: the dev accuracy of its one dataset; Part 2: the multitask dev
mean). The study is stored in SQLite (runs/sweeps/STUDY.db) so a killed sweep resumes where it stopped,
without re-running finished trials; --storage URL names a database several machines can share. A
median pruner gets every epoch's dev score and stops trials that fall behind. Every trial is appended to
runs/sweeps/STUDY/trials.csv; at the end a ranked table (mean and spread over seeds) and the winning
command line are printed.
"""
import csv
import shlex
import statistics
import time
from pathlib import Path

from flags import Parser, positive_int
from utils import MinbertError, main_guard

PIPELINES = {"classifier": "classifier.py", "multitask": "multitask_classifier.py"}


def pipeline_module(name):
    import classifier
    import multitask_classifier
    return {"classifier": classifier, "multitask": multitask_classifier}[name]


# ----------------------------------------------------------------------------- the search space

def parse_space(items):
    """['lr=log:1e-5:2e-4', 'hidden_dropout_prob=0.1,0.3'] -> {flag: (kind, values)}; a bad item is one line."""
    space = {}
    for item in items:
        if "=" not in item:
            raise MinbertError(f"--space {item!r}: expected FLAG=SPEC, e.g. lr=log:1e-5:2e-4 or hidden_dropout_prob=0.1,0.3")
        flag, spec = item.split("=", 1)
        flag = flag.lstrip("-")
        parts = spec.split(":")
        if parts[0] in ("log", "float", "int"):
            if len(parts) != 3:
                raise MinbertError(f"--space {item!r}: {parts[0]} needs LO:HI, e.g. {flag}={parts[0]}:1e-5:1e-3")
            try:
                lo, hi = (int(p) if parts[0] == "int" else float(p) for p in parts[1:])
            except ValueError:
                raise MinbertError(f"--space {item!r}: LO and HI must be numbers") from None
            if not lo < hi or (parts[0] == "log" and lo <= 0):
                raise MinbertError(f"--space {item!r}: need LO < HI" + (" and LO > 0" if parts[0] == "log" else ""))
            space[flag] = (parts[0], (lo, hi))
        else:
            choices = [c for c in spec.split(",") if c]
            if not choices:
                raise MinbertError(f"--space {item!r}: no choices")
            space[flag] = ("choice", choices)
    return space


def flag_name(flag):
    return "--fine-tune-mode" if flag in ("fine_tune_mode", "fine-tune-mode") else f"--{flag}"


def check_flags(pipeline, base, space):
    """Parse the fixed flags with every value the space can produce at its ends: an unknown flag or a bad
    value fails here, in one line, before anything trains."""
    mod = pipeline_module(pipeline)
    mod.get_args(base)
    for flag, (kind, values) in space.items():
        for v in values:
            mod.get_args(base + [flag_name(flag), str(v)])
    for reserved in ("--seed", "--run_name"):
        if reserved in base or any(flag_name(f) == reserved for f in space):
            raise MinbertError(f"{reserved} is set by the sweep (use --seeds); drop it from the trial flags")


def suggest(trial, space):
    values = {}
    for flag, (kind, vals) in space.items():
        if kind == "log":
            values[flag] = trial.suggest_float(flag, *vals, log=True)
        elif kind == "float":
            values[flag] = trial.suggest_float(flag, *vals)
        elif kind == "int":
            values[flag] = trial.suggest_int(flag, *vals)
        else:
            values[flag] = trial.suggest_categorical(flag, vals)
    return values


def as_argv(values):
    return [x for flag, v in values.items() for x in (flag_name(flag), f"{v:.4g}" if isinstance(v, float) else str(v))]


# ----------------------------------------------------------------------------- a trial

def run_trial(pipeline, base, values, seeds, name, folder, report):
    """Train once per seed; returns the per-seed dev scores. `report(step, score)` feeds the pruner."""
    mod = pipeline_module(pipeline)
    scores = []
    for i, seed in enumerate(seeds):
        run = f"{name}-s{seed}"
        outs = ["--run_name", run]
        if pipeline == "classifier":  # the trial's files stay in its run folder: predictions/ is the user's
            outs += ["--predictions_dir", str(Path("runs") / run)]
        else:
            outs += ["--results", str(folder / "multitask-results.csv")] + [
                x for p in ("sst", "para", "sts") for s in ("dev", "test")
                for x in (f"--{p}_{s}_out", str(Path("runs") / run / f"{p}-{s}-output.csv"))]
        # The pruner's step: seed i's epoch e is step 1000 i + e, the same step in every trial.
        result = mod.main(base + as_argv(values) + ["--seed", str(seed)] + outs,
                          on_epoch=lambda epoch, score, i=i: report(1000 * i + epoch, score))
        scores.append(result[0]["dev_acc"] if pipeline == "classifier" else multitask_score(result))
    return scores


def multitask_score(scores):
    from evaluation import multitask_mean
    return multitask_mean(scores)


# ----------------------------------------------------------------------------- the sweep

FIELDS = ["trial", "state", "params", "seeds", "scores", "mean", "std", "minutes"]


def append_row(path, row):
    new = not path.exists()
    with open(path, "a", newline="") as fp:
        w = csv.DictWriter(fp, FIELDS)
        if new:
            w.writeheader()
        w.writerow(row)


def sweep(args, base):
    import optuna
    space = parse_space(args.space)
    if not space:
        raise MinbertError("--space: give at least one FLAG=SPEC")
    if args.sampler == "grid" and any(kind != "choice" for kind, _ in space.values()):
        raise MinbertError("--sampler grid takes comma lists only (e.g. lr=1e-5,3e-5); ranges need --sampler tpe")
    check_flags(args.pipeline, base, space)
    study_name = args.study or f"{args.pipeline}-sweep"
    folder = Path("runs") / "sweeps" / study_name
    folder.mkdir(parents=True, exist_ok=True)
    storage = args.storage or f"sqlite:///{folder.parent / (study_name + '.db')}"
    sampler = (optuna.samplers.GridSampler({f: v for f, (_, v) in space.items()}, seed=args.sampler_seed)
               if args.sampler == "grid" else optuna.samplers.TPESampler(seed=args.sampler_seed))
    pruner = (optuna.pruners.MedianPruner(n_startup_trials=args.prune_startup, n_warmup_steps=args.prune_warmup)
              if args.prune else optuna.pruners.NopPruner())
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(study_name=study_name, storage=storage, sampler=sampler, pruner=pruner,
                                direction="maximize", load_if_exists=True)
    states = optuna.trial.TrialState
    for t in study.get_trials(deepcopy=False, states=(states.RUNNING,)):  # killed mid-trial: it never finished
        study.tell(t.number, state=states.FAIL, skip_if_finished=True)
    done = [t for t in study.get_trials(deepcopy=False) if t.state in (states.COMPLETE, states.PRUNED)]
    todo = max(0, args.trials - len(done))
    print(f"study {study_name} in {storage}: {len(done)} trial(s) finished before, {todo} to run; "
          f"trials logged to {folder / 'trials.csv'}")
    csv_path = folder / "trials.csv"

    def objective(trial):
        values = suggest(trial, space)
        t0 = time.perf_counter()
        name = f"{study_name}-t{trial.number}"
        print(f"trial {trial.number}: {' '.join(as_argv(values))} (seeds {' '.join(map(str, args.seeds))})")

        def report(step, score):
            trial.report(score, step)
            if trial.should_prune():
                append_row(csv_path, {"trial": trial.number, "state": "pruned", "params": " ".join(as_argv(values)),
                                      "seeds": " ".join(map(str, args.seeds)), "scores": "", "mean": score, "std": "",
                                      "minutes": f"{(time.perf_counter() - t0) / 60:.1f}"})
                print(f"trial {trial.number}: pruned after epoch {step % 1000} (dev score {score:.4f})")
                raise optuna.TrialPruned()
        scores = run_trial(args.pipeline, base, values, args.seeds, name, folder, report)
        mean = statistics.fmean(scores)
        std = statistics.stdev(scores) if len(scores) > 1 else 0.0
        trial.set_user_attr("scores", scores)
        append_row(csv_path, {"trial": trial.number, "state": "complete", "params": " ".join(as_argv(values)),
                              "seeds": " ".join(map(str, args.seeds)), "scores": " ".join(f"{s:.4f}" for s in scores),
                              "mean": f"{mean:.4f}", "std": f"{std:.4f}",
                              "minutes": f"{(time.perf_counter() - t0) / 60:.1f}"})
        return mean
    if todo:
        study.optimize(objective, n_trials=todo, catch=())
    return summarize(study, args, base, space)


def summarize(study, args, base, space):
    import optuna
    complete = [t for t in study.get_trials(deepcopy=False) if t.state == optuna.trial.TrialState.COMPLETE]
    if not complete:
        print("no complete trial yet")
        return None
    rows = sorted(complete, key=lambda t: -t.value)
    print(f"{'rank':<5} {'trial':<6} {'mean':<8} {'spread':<8} flags")
    for i, t in enumerate(rows, start=1):
        scores = t.user_attrs.get("scores", [t.value])
        spread = statistics.stdev(scores) if len(scores) > 1 else 0.0
        print(f"{i:<5} {t.number:<6} {t.value:<8.4f} {spread:<8.4f} {' '.join(as_argv(t.params))}")
    best = rows[0]
    script = PIPELINES[args.pipeline]
    command = " ".join(shlex.quote(a) for a in ["python", script, *base, *as_argv(best.params)])
    print(f"best: trial {best.number}, mean dev score {best.value:.4f} over seeds {' '.join(map(str, args.seeds))}")
    print(f"winning command: {command}")
    return {"best_value": best.value, "best_params": best.params, "command": command, "trials": len(complete)}


def main(argv=None):
    import sys
    argv = list(sys.argv[1:] if argv is None else argv)
    base = []
    if "--" in argv:
        i = argv.index("--")
        argv, base = argv[:i], argv[i + 1:]
    ap = Parser(description=__doc__)
    ap.add_argument("pipeline", choices=sorted(PIPELINES))
    ap.add_argument("--trials", type=positive_int, default=8, help="finished trials wanted in the study")
    ap.add_argument("--space", nargs="+", default=[], metavar="FLAG=SPEC")
    ap.add_argument("--seeds", type=int, nargs="+", default=[11711])
    ap.add_argument("--sampler", choices=["tpe", "grid"], default="tpe")
    ap.add_argument("--sampler_seed", type=int, default=0)
    ap.add_argument("--study", default=None, help="study name (default: PIPELINE-sweep)")
    ap.add_argument("--storage", default=None, help="an Optuna storage URL (default: SQLite in runs/sweeps/)")
    ap.add_argument("--no_prune", dest="prune", action="store_false", help="never stop a trial early")
    ap.add_argument("--prune_startup", type=positive_int, default=2, help="trials finished before pruning starts")
    ap.add_argument("--prune_warmup", type=int, default=0, help="epochs of every trial never pruned")
    args = ap.parse_args(argv)
    if args.pipeline == "classifier":
        datasets = base[base.index("--datasets") + 1:] if "--datasets" in base else []
        datasets = [d for d in datasets[:2] if not d.startswith("-")]
        if len(datasets) != 1:
            raise MinbertError("a classifier sweep scores one dataset: pass --datasets sst (or cfimdb) after --")
    return sweep(args, base)


if __name__ == "__main__":
    main_guard(main)
