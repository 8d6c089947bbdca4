"""How hard each Part 2 task pulls on the shared encoder: the loss and the encoder's gradient norm of a few
training batches per task, at the starting weights, with any multitask_classifier.py flags.

    python tools/grad_norms.py --pretrained all-minilm-l6-v2 --pair_encoding siamese --sts_loss cosent

One AdamW serves all tasks, so a task whose gradients are far larger than the others' fills the second
moments: the other tasks' steps shrink by about the same factor and they stop learning. This is why
`--sts_loss cosent` needs `--max_grad_norm` (RESULTS.md, "Part 2: sentence embeddings").
"""
import dataclasses
import sys
from pathlib import Path

if not __package__:  # run as a file (python tools/NAME.py): the project folder first, not tools/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# first, before torch loads: a Ctrl-C meanwhile is one line (minbert/cli.py)
from minbert.cli import MinbertError, main_guard  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

from minbert.course_data import MULTITASK  # noqa: E402
from datasets import load_multitask_data  # noqa: E402
from minbert.flags.settings import multitask_settings, parse_multitask  # noqa: E402
from minbert.objectives.losses import MultitaskLoss  # noqa: E402
from minbert.specs import ModelSpec, TaskLosses  # noqa: E402
from minbert.tasks.multitask import MultitaskBERT  # noqa: E402
from tokenizer import BertTokenizer  # noqa: E402
from utils import seed_everything  # noqa: E402


def grad_norms(settings, batches=3):
    """{task: (mean loss, mean encoder gradient norm)} over the first `batches` shuffled training batches of a
    specs.MultitaskSettings."""
    spec = settings.model
    seed_everything(settings.recipe.seed)
    data = load_multitask_data(settings.data.paths, BertTokenizer.from_pretrained(spec.pretrained), spec.max_length,
                               spec.pair_encoding, ["train"])["train"]
    model = MultitaskBERT(spec).train()
    loss_fn = MultitaskLoss.from_spec(settings.losses)  # the regularisers left out: the task losses' own pull
    encoder = [p for p in model.bert.parameters() if p.requires_grad]
    out = {}
    for task in MULTITASK:
        losses, norms = [], []
        for i, batch in zip(range(batches), data[task].batches(settings.data.batch_size, True, settings.recipe.seed)):
            model.zero_grad(set_to_none=True)
            loss = loss_fn(model, {**batch, "task": task})
            loss.backward()
            losses.append(loss.item())
            grads = [p.grad for p in encoder if p.grad is not None]
            norms.append(torch.nn.utils.get_total_norm(grads).item())
        out[task] = (float(np.mean(losses)), float(np.mean(norms)))
    return out


# The flags this tool reads: the model's and the task losses' (their spec fields), the training data and how it is
# batched and seeded. The rest (training, evaluating, where runs and outputs go) would change nothing here.
READ = ({f.name for f in dataclasses.fields(ModelSpec)} | {f.name for f in dataclasses.fields(TaskLosses)}
        | {"hidden_dropout_prob", "task_dropout", "label_smoothing", "loss_weights", "extra_task", "attn", "recipe",
           "data_dir", "sst_train", "para_train", "sts_train", "batch_size", "seed"})


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_multitask(argv, "tools/grad_norms.py", __doc__)
    idle = sorted(f"--{d}" for d in args.typed - READ)
    if idle:  # (--eval_only CKPT, say, would have measured the starting weights, not the checkpoint's)
        raise MinbertError(f"tools/grad_norms.py: {', '.join(idle)} change{'s' if len(idle) == 1 else ''} nothing "
                           "here: it measures a few training batches' gradients at the starting weights, without "
                           f"training, evaluating or writing anything; leave {'it' if len(idle) == 1 else 'them'} "
                           "out")
    settings = multitask_settings(args)
    for task, (loss, norm) in grad_norms(settings).items():
        print(f"{task}: loss {loss:.3f}, encoder gradient norm {norm:.3f}")


if __name__ == "__main__":
    main_guard(main)
