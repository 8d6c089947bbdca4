"""Scoring: batched inference in input order, metrics, leaderboard files, and `--score PRED GOLD`."""
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from minbert.course_data import MULTITASK, TASKS, TASK_PREFIX, read_examples
from minbert.files import atomic_write, read_text, text_lines
from minbert.precision import autocast
from utils import MinbertError, Parser, Progress, main_guard, to_device


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


def accuracy(pred, gold):
    return float(np.mean(np.asarray(pred) == np.asarray(gold)))


def macro_f1(pred, gold):
    """The mean over classes of F1 = 2 TP / (2 TP + FP + FN), each class seen in the gold labels or the predictions
    counting alike (scikit-learn's average="macro"; written here so that a command does not import scikit-learn,
    two seconds of every start)."""
    pred, gold = np.asarray(pred).ravel(), np.asarray(gold).ravel()
    f1 = []
    for c in np.union1d(pred, gold):
        tp = np.sum((pred == c) & (gold == c))
        wrong = np.sum((pred == c) != (gold == c))  # FP + FN
        f1.append(2 * tp / (2 * tp + wrong))
    return float(np.mean(f1)) if f1 else 0.0


def pearson(pred, gold):
    pred, gold = np.asarray(pred, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    if not np.isfinite(pred).all():
        return float("nan")  # outputs that are not numbers have no correlation (a diverged model)
    if pred.std() == 0 or gold.std() == 0:
        return 0.0  # constant predictions carry no correlation
    return float(np.corrcoef(pred, gold)[0, 1])


def score(task, pred, gold):
    """The leaderboard metric of a task: Pearson r for STS, accuracy otherwise."""
    return pearson(pred, gold) if TASKS[task].kind == "regression" else accuracy(pred, gold)


def format_prediction(task, value):
    return f"{float(value):.4f}" if TASKS[task].kind == "regression" else str(int(value))


def write_predictions(path, task, ids, preds):
    """Leaderboard format (handout section 6): a header, then `id , prediction` per input row, in order."""
    header = TASKS[task].header

    def write(fp):
        fp.write(f"id , {header}\n")
        for i, p in zip(ids, preds):
            fp.write(f"{i} , {format_prediction(task, p)}\n")
    atomic_write(path, write, mode="w")
    return path


def write_dev_scores(path, task, data, outputs, preds):
    """The model's raw dev outputs beside the leaderboard files, for report.py: ids, texts, gold (NaN where
    a row has no label), predictions and raw outputs (SST/CFIMDB logits, the Quora logit, the STS score)."""
    n = len(data)
    gold = np.full(n, np.nan)
    if data.labels is not None:
        gold[data.scored] = data.labels.numpy()[data.scored]
    texts = [e.texts for e in data.examples]
    fields = dict(task=np.array(task), ids=np.array(data.ids), gold=gold,
                  pred=np.asarray(preds, dtype=np.float64),
                  output=np.asarray(outputs, dtype=np.float32), text1=np.array([t[0] for t in texts]),
                  text2=np.array([t[1] if len(t) > 1 else "" for t in texts]))
    atomic_write(path, lambda fp: np.savez_compressed(fp, **fields))
    return path


def read_predictions(path):
    """{id: value string} from a prediction file (ours or the course's 'id \\t Predicted_...' header)."""
    path = Path(path)
    if not path.is_file():
        raise MinbertError(f"{path}: prediction file not found")
    lines = text_lines(read_text(path, "prediction file").lstrip("\ufeff"))
    if not lines or not lines[0].strip().lower().startswith("id"):
        raise MinbertError(f"{path}: line 1: expected a header starting with 'id'")
    preds, duplicated = {}, []
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 2 or not parts[0]:
            raise MinbertError(f"{path}: line {n}: expected 'id , prediction', got {line!r}")
        if parts[0] in preds:  # the first one counts; the rest are reported
            duplicated.append(parts[0])
            continue
        try:
            preds[parts[0]] = float(parts[1])
        except ValueError:
            raise MinbertError(f"{path}: line {n} (id {parts[0]}): "
                               f"prediction {parts[1]!r} is not a number") from None
    return preds, duplicated


def score_file(pred_path, gold_path, task=None):
    """Score a prediction file against a labelled course CSV; report missing, duplicated, unknown ids."""
    task = task or guess_task(gold_path)
    label = TASKS[task].label_col
    header = text_lines(read_text(gold_path, "labelled CSV")[:10000])[:1] if Path(gold_path).is_file() else []
    if header and label not in [h.strip() for h in header[0].split("\t")]:
        raise MinbertError(f"{gold_path}: no {label} column, so no labels to score against (a test file has none): "
                           f"give the labelled dev or train file of {task}")
    gold = {e.id: e.label for e in read_examples(gold_path, task, "dev", log=lambda *_: None)}
    preds, duplicated = read_predictions(pred_path)
    missing = [i for i in gold if i not in preds]
    unknown = [i for i in preds if i not in gold]
    scored = [i for i in gold if i in preds and gold[i] is not None]  # unlabelled gold rows: not scored
    metric = "pearson" if TASKS[task].kind == "regression" else "accuracy"
    result = {"task": task, "metric": metric, "n": len(scored),
              metric: score(task, [preds[i] for i in scored],
                            [gold[i] for i in scored]) if scored else float("nan"),
              "missing": missing, "duplicated": duplicated, "unknown": unknown}
    return result


def guess_task(path):
    name = Path(path).name.lower()
    for key, task in (("sst", "sst"), ("cfimdb", "cfimdb"), ("quora", "quora"), ("para", "quora"),
                      ("sts", "sts")):
        if key in name:
            return task
    raise MinbertError(f"{path}: cannot tell the task from the file name; pass --task")


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
    print(f"{r['task']} {r['metric']}: {r[r['metric']]:.4f} over {r['n']} ids")



# ----------------------------------------------------------------------------- multitask

def multitask_outputs(model, task, batch):
    """The raw output a task is scored on (SST logits, Quora logit, STS similarity on 0-5): the model's
    own forward path for the task, the one training uses."""
    return model.task_forward(task, batch).output


def to_predictions(task, outputs):
    if task == "sst":
        return outputs.argmax(-1)
    if task == "quora":
        return (outputs > 0).astype(np.int64)  # logit > 0  <=>  probability > 0.5
    return outputs


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


def multitask_mean(scores):
    """The leaderboard's overall score: mean of SST acc, Quora acc and (STS r + 1) / 2."""
    return (scores["sst"] + scores["quora"] + (scores["sts"] + 1) / 2) / 3


def format_scores(s):
    return (f"SST acc {s['sst']:.3f}, Quora acc {s['quora']:.3f}, STS r {s['sts']:.3f}, "
            f"mean {multitask_mean(s):.3f}")


def output_name(task, split):
    """A Part 2 leaderboard file's name (in a run folder, in predictions/, in ensemble.py's output)."""
    return f"{TASK_PREFIX[task]}-{split}-output.csv"


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
