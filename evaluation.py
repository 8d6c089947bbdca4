"""Evaluation: batched inference in input order, the multitask model scored and its leaderboard files written,
and `--score PRED GOLD`. The metrics and the files themselves (no torch): minbert/scoring.py, re-exported here."""
from pathlib import Path

# first, before torch loads: a Ctrl-C meanwhile is one line (minbert/cli.py)
from minbert.cli import MinbertError, Parser, Progress, main_guard

import numpy as np
import torch
from tqdm.auto import tqdm

from minbert.course_data import MULTITASK, TASKS, TASK_PREFIX
from minbert.precision import autocast
from minbert.scoring import (accuracy, format_prediction, format_scores, guess_task, macro_f1,  # noqa: F401
                             multitask_mean, output_name, pearson, read_predictions, score, score_file,
                             to_predictions, write_dev_scores, write_predictions)
from utils import to_device


@torch.inference_mode()
def predict(fn, data, batch_size, device, amp="none", desc="eval"):
    """Run `fn(batch) -> tensor [B, ...]` over `data` (a TaskData) and return a float32 array in the
    data's own order. Batches are length-sorted for speed and put back by index. Outputs stay on the
    device until the end: one copy to the host, not a sync per batch. One autocast region covers every batch,
    so that each weight is cast to the reduced precision once per call, not once per batch (autocast's cast
    cache)."""
    outputs, order = [], []
    total = -(-len(data) // batch_size)
    bar = tqdm(data.batches(batch_size, shuffle=False, bucket=True), total=total, desc=desc, disable=None,
               leave=False)
    progress = Progress(desc, total, 60.0, terminal=not bar.disable)
    with autocast(device, amp):
        for i, batch in enumerate(bar, start=1):
            progress.update(i)
            # a fixed-shape batch's filler rows (datasets.set_fixed_shapes) come
            # last: their outputs are dropped
            real = int(batch["weight"].sum()) if "weight" in batch else len(batch["index"])
            order.append(batch["index"][:real])
            outputs.append(fn(to_device(batch, device))[:real].float())
    ys = torch.cat(outputs).cpu().numpy()
    out = np.empty_like(ys)
    out[torch.cat(order).numpy()] = ys
    return out


def build_parser():
    ap = Parser(prog="evaluation.py", description="Score a leaderboard prediction "
                                                  "file against a labelled CSV.")
    ap.add_argument("--score", nargs=2, metavar=("PRED.csv", "GOLD.csv"), required=True,
                    help="a leaderboard file and the labelled course CSV of its split")
    ap.add_argument("--task", choices=sorted(TASKS), help="the task (default: from the gold file's name)")
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    r = score_file(*args.score, task=args.task)
    bad = [f"{len(r[w])} {w} id(s) ({', '.join(r[w][:5])}{' ...' if len(r[w]) > 5 else ''})"
           for w in ("missing", "duplicated", "unknown") if r[w]]
    if bad:  # a score over part of the ids would mislead: say what is wrong instead
        raise MinbertError(f"{args.score[0]}: not scored against {args.score[1]}: " + "; ".join(bad))
    value = f"undefined ({r['undefined']})" if r["undefined"] else f"{r[r['metric']]:.4f}"
    print(f"{r['task']} {r['metric']}: {value} over {r['n']} ids")



# ----------------------------------------------------------------------------- multitask

def multitask_outputs(model, task, batch):
    """The raw output a task is scored on (SST logits, Quora logit, STS similarity on 0-5): the model's
    own forward path for the task, the one training uses."""
    return model.task_forward(task, batch).output


def model_eval_multitask(model, data, batch_size, device, amp="none", raw=None):
    """Score `model` on {task: dataset} (labelled or not). Returns ({task: metric}, {task: predictions});
    a dict given as `raw` receives each task's raw outputs."""
    model.eval()
    scores, preds = {}, {}
    for task, d in data.items():
        out = predict(lambda b: multitask_outputs(model, task, b), d, batch_size, device, amp,
                      desc=f"{task} eval")
        if raw is not None:
            raw[task] = out
        preds[task] = to_predictions(task, out)
        if d.labels is not None:  # rows without a gold label (broken course rows) are predicted, not scored
            scores[task] = score(task, preds[task][d.scored], d.labels.numpy()[d.scored])
    return scores, preds


def write_multitask_outputs(model, dev, test, folder, device, amp="none", batch_size=64):
    """Score dev, predict test and write the six leaderboard files into `folder`, with each task's raw dev
    outputs beside them for report.py. Returns (dev scores, [the six files])."""
    folder, raw, files = Path(folder), {}, []
    scores, dev_preds = model_eval_multitask(model, dev, batch_size, device, amp, raw=raw)
    _, test_preds = model_eval_multitask(model, test, batch_size, device, amp)
    for task in MULTITASK:
        write_dev_scores(folder / f"{TASK_PREFIX[task]}-dev-scores.npz", task, dev[task], raw[task],
                         dev_preds[task])
        for split, data, preds in (("dev", dev, dev_preds), ("test", test, test_preds)):
            files.append(write_predictions(folder / output_name(task, split), task, data[task].ids,
                                           preds[task]))
    return scores, files


if __name__ == "__main__":
    main_guard(main)
