"""Combine K multitask models into one set of leaderboard files (handout 5.3: ensembling
"almost always boosts performance").

    python ensemble.py runs/a/multitask.pt runs/b/multitask.pt runs/c/multitask.pt [--run_name NAME]

A member is a multitask_classifier.py checkpoint (rebuilt from its own spec and run on dev and test), a run's
folder (which stands for its checkpoint), or a folder holding just the six prediction files of a run when only
predictions are left. Every member is checked before any of them runs. Checkpoints are combined on their
outputs: SST by averaging the five class probabilities, Quora by averaging P(paraphrase), STS by averaging the
0-5 score. A folder contributes its labels as one-hot probabilities, so folders alone make a majority vote (a
tie goes to the lower SST class and to "not a paraphrase", and one line says how many rows tied) and the
average of the STS scores.

The ensemble is a run like any other: its six files go into its own folder (runs/ensemble-TIMESTAMP, or
--run_name / --run_dir), with members.txt naming its members, and are then copied to --out
(predictions/ by default), with one line naming whose files they replace.

--soft_targets also runs every member (checkpoints only) on the three training sets and writes their raw
outputs into the run folder as soft-targets.npz, which `multitask_classifier.py --distill` trains a single
student on (minbert/objectives/distill.py). Members trained with --fold I/K, one per fold, give cross-fitted
targets: each training example's from the members that did not train on it.
"""
from minbert.flag import ENSEMBLE
from minbert.flags import parsers
from minbert.flags.groups import RunFolder, add_backup_flag
from minbert.flags.settings import ensemble_settings
from minbert.flags.typed import parse_flags
from minbert.flags.types import positive_int
from minbert.objectives.distill import SOFT_TARGETS
from minbert.pipelines.ensemble import run_ensemble
from minbert.specs import EnsembleSettings
from utils import main_guard


def build_parser():
    ap = parsers.parser(ENSEMBLE, prog="ensemble.py", description="Average K multitask models into one set of "
                                                                "leaderboard files.")
    ap.add_argument("members", nargs="+", metavar="CKPT", help="multitask checkpoints (or their run "
                                                               "folders), or folders of prediction files")
    ap.add_argument("--data_dir", default=EnsembleSettings.data_dir,
                    help="the course CSVs whose ids every member must predict")
    ap.add_argument("--out", default=EnsembleSettings.out, help="where the six ensembled leaderboard files are copied")
    ap.add_argument("--run_name", default="", action=RunFolder, help="the ensemble's run folder under "
                                                                     "runs/ (default: ensemble-TIMESTAMP)")
    ap.add_argument("--run_dir", default=None, action=RunFolder, help="the ensemble's run folder "
                                                                      "anywhere (instead of runs/RUN_NAME)")
    add_backup_flag(ap)
    ap.add_argument("--use_gpu", action="store_true", help="run the members on the GPU")
    ap.add_argument("--batch_size", type=positive_int, default=EnsembleSettings.batch_size,
                    help="examples per inference batch")
    ap.add_argument("--soft_targets", action="store_true",
                    help=f"also write the members' outputs on the training sets to {SOFT_TARGETS} in the run "
                         "folder, for multitask_classifier.py --distill (checkpoint members only)")
    ap.add_argument("--in_sample", action="store_true",
                    help="with members trained with --fold: average every member on every training example "
                         "anyway, seen or not (the ablation of cross-fitted targets)")
    return ap


def main(argv=None):
    return run_ensemble(ensemble_settings(parse_flags(build_parser(), argv)))


if __name__ == "__main__":
    main_guard(main)
