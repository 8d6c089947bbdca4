"""What an ensemble's soft targets tell a student beyond the gold labels, on the
training sets it is taught on.

    python tools/soft_targets.py runs/ENSEMBLE/soft-targets.npz [--data_dir data] [--distill_temperature 2]

For each task, the targets `--distill` trains on (minbert/objectives/distill.py teacher_targets, at the same
temperature) against the gold labels of the same training examples: SST and Quora, how often the target's most
likely class is the gold one and the mean probability it gives the gold class; STS, the Pearson r of the
target scores with the gold ones. Teachers trained on these very examples fit them far better than held-out
data, so the closer these figures are to 1, the less a student can learn from the targets that the labels do
not already say (Hinton et al. 2015 distil on a transfer set for this reason).
"""
import sys
from pathlib import Path
from types import SimpleNamespace

if not __package__:  # run as a file (python tools/NAME.py): the project folder first, not tools/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# first, before torch loads: a Ctrl-C meanwhile is one line (minbert/cli.py)
from minbert.cli import Parser, main_guard  # noqa: E402

import torch  # noqa: E402

from minbert.course_data import data_file, read_examples  # noqa: E402
from evaluation import accuracy, pearson  # noqa: E402
from minbert.flags.types import positive_float  # noqa: E402
from minbert.objectives.distill import TASKS, teacher_targets  # noqa: E402


def agreement(targets, examples):
    """{task: (name, value) pairs} of the targets against the gold labels."""
    out = {}
    for task in TASKS:
        gold, target = [e.label for e in examples[task]], targets[task].double()
        if task == "sst":
            out[task] = [("argmax = gold", accuracy(target.argmax(-1).numpy(), gold)),
                         ("p(gold)", target[torch.arange(len(gold)), torch.tensor(gold)].mean().item())]
        elif task == "quora":
            # P(paraphrase) or its complement
            p_gold = torch.where(torch.tensor(gold) > 0.5, target, 1 - target)
            out[task] = [("argmax "
                          "= gold", (p_gold > 0.5).double().mean().item()), ("p(gold)", p_gold.mean().item())]
        else:
            out[task] = [("Pearson r", pearson(target.numpy(), gold))]
    return out


def main(argv=None):
    ap = Parser(prog="tools/soft_targets.py", description=__doc__)
    ap.add_argument("soft_targets", help="the soft-targets.npz of ensemble.py --soft_targets")
    ap.add_argument("--data_dir", default="data")
    ap.add_argument("--distill_temperature", type=positive_float, default=2.0)
    args = ap.parse_args(argv)
    examples = {t: read_examples(data_file(args.data_dir, t, "train"), t, "train",
                                 log=lambda *a: None) for t in TASKS}
    train = {t: SimpleNamespace(ids=[e.id for e in examples[t]]) for t in TASKS}
    targets = teacher_targets(args.soft_targets, train, args.distill_temperature, flag="")
    for task, figures in agreement(targets, examples).items():
        print(f"{task} ({len(examples[task])} training examples): "
              + ", ".join(f"{name} {value:.3f}" for name, value in figures))


if __name__ == "__main__":
    main_guard(main)
