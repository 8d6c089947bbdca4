"""Hyperparameter search over either pipeline's flags, on Optuna, with any number of workers.

    python sweep.py multitask --trials 8 --space lr=log:1e-5:2e-4 hidden_dropout_prob=0.1,0.3 \\
        --seeds 11711 42 -- --epochs 3 --pretrained all-minilm-l6-v2
    python sweep.py classifier --sampler grid --space lr=3e-5,5e-5,1e-4 scheduler=constant,linear \\
        -- --datasets sst --fine-tune-mode full-model --epochs 3 --pretrained all-minilm-l6-v2

--space takes FLAG=SPEC: `log:LO:HI` (log-uniform), `float:LO:HI`, `int:LO:HI`, or a comma list of
choices (the only kind the grid sampler takes). Flags after `--` are passed to every trial. A trial runs
the pipeline script once per seed, each in its own process and run folder (runs/sweeps/STUDY/tN-sSEED),
and scores the mean over seeds of the best dev score (Part 1: the dev accuracy of its one dataset; Part 2:
the multitask dev mean). A median pruner reads every epoch's dev score from the run's log and stops
trials that fall behind. A trial whose flags cannot work together fails alone, in one line, and the
sweep goes on.

Workers: start the same command several times, on one machine or several (with --storage
postgresql://USER:PASSWORD@HOST/DB, a database every machine reaches; the default is SQLite in
runs/sweeps/STUDY.db, fine for workers on one machine). They share the study's trials through the
database: each trial is run once, and --trials counts the study's finished trials, not one worker's.
Each worker keeps a heartbeat on its running trial; a trial whose worker died (killed, machine gone) is
failed once its heartbeat is older than the grace period (at once, when its worker was on this machine
and its process is gone) and queued again with the same flags. Ctrl-C stops this worker's trial (it is
queued again) and prints the command that continues the sweep. Every trial is appended to
runs/sweeps/STUDY/trials.csv; at the end a ranked table (mean and spread over seeds) and the winning
command line are printed, with a warning: the best of N trials on dev is biased upward, so the commands that
re-run the winner on fresh seeds and compare those runs with a baseline's follow. With --baseline RUN...
(the baseline's run folders, one per seed) the winning trial's runs are compared with them at once, with
report.py --compare's tests (docs/statistics.md). The code: minbert/sweeps/.
"""
import sys

from minbert.flags.settings import sweep_settings
from minbert.flags.typed import check_idle_flags, parse_flags
from minbert.flags.types import nonneg_int, positive_int, seed
from minbert.specs import SweepSettings
from minbert.sweeps.space import check_space_spelling
from minbert.sweeps.study import sweep
from minbert.sweeps.trials import PIPELINES
from utils import Parser, main_guard


def build_parser():
    ap = Parser(prog="sweep.py", description="Optuna search over a pipeline's flags; workers share a study.")
    ap.add_argument("pipeline", choices=sorted(PIPELINES), help="classifier.py or multitask_classifier.py")
    ap.add_argument("--trials", type=positive_int, default=SweepSettings.trials,
                    help="finished trials wanted in the study (all workers)")
    ap.add_argument("--space", nargs="+", default=[], metavar="FLAG=SPEC",
                    help="the flags searched: FLAG=log:LO:HI, float:LO:HI, int:LO:HI, or a comma list of choices")
    ap.add_argument("--seeds", type=seed, nargs="+", default=list(SweepSettings.seeds),
                    help="every trial runs once per seed")
    ap.add_argument("--sampler", choices=["tpe", "grid"], default="tpe",
                    help="Optuna's TPE, or every combination of the comma lists")
    ap.add_argument("--sampler_seed", type=seed, default=None,
                    help="make TPE's suggestions repeatable (default: "
                         "fresh each start, so workers and restarts differ)")
    ap.add_argument("--study", default=None, help="study name (default: PIPELINE-sweep)")
    ap.add_argument("--storage", default=None,
                    help="sqlite:///PATH or postgresql://USER:PASSWORD@HOST/DB "
                         "(default: SQLite in runs/sweeps/)")
    ap.add_argument("--no_prune", dest="prune", action="store_false", help="never stop a trial early")
    ap.add_argument("--prune_startup", type=positive_int, default=SweepSettings.prune_startup,
                    help="trials finished before pruning starts")
    ap.add_argument("--prune_warmup", type=nonneg_int, default=SweepSettings.prune_warmup,
                    help="epochs of every trial never pruned")
    ap.add_argument("--baseline", nargs="+", default=(), metavar="RUN",
                    help="run folders of the configuration to beat, one per seed: at the end the winning "
                         "trial's runs are compared with them (report.py --compare's tests)")
    return ap


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    base = []
    command = list(argv)
    if "--" in argv:
        i = argv.index("--")
        argv, base = argv[:i], argv[i + 1:]
    check_space_spelling(argv, build_parser()._option_string_actions)
    args = parse_flags(build_parser(), argv)
    check_idle_flags(vars(args), args.typed, SWEEP_IDLE)
    return sweep(sweep_settings(args, base, command))


# The sweep's own flags that act only with others (minbert/flags/typed.py check_idle_flags).
SWEEP_IDLE = {
    "sampler_seed": (lambda flags, typed: flags["sampler"] == "tpe",
                     "seeds TPE's suggestions, which --sampler grid does not draw"),
    **{f: (lambda flags, typed: flags["prune"], "tunes the median pruner, which --no_prune turns off")
       for f in ("prune_startup", "prune_warmup")},
}


if __name__ == "__main__":
    main_guard(main)
