"""Scores and leaderboard files: the tasks' metrics, the multitask mean, predictions from raw outputs, the
leaderboard's prediction files (written and read) and scoring one against a labelled course CSV. NumPy only, no
torch, so that a command reading runs (report.py) starts in a fraction of a second; evaluation.py, which runs
models, re-exports it all under the handout's names."""
import math
from pathlib import Path

import numpy as np

from minbert.cli import MinbertError
from minbert.course_data import TASKS, TASK_PREFIX, read_examples
from minbert.files import atomic_write, read_text, require_file, text_lines


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


def prediction_writer(task, ids, preds):
    """write(fp) writing the leaderboard format (handout section 6): a header, then `id , prediction` per input
    row, in order."""
    header = TASKS[task].header

    def write(fp):
        fp.write(f"id , {header}\n")
        for i, p in zip(ids, preds):
            fp.write(f"{i} , {format_prediction(task, p)}\n")
    return write


def write_predictions(path, task, ids, preds):
    """The leaderboard file of `preds` at `path` (prediction_writer), written whole."""
    atomic_write(path, prediction_writer(task, ids, preds), mode="w")
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


def read_predictions(path, task=None):
    """({id: value}, [ids given more than once]) from a prediction file (ours or the course's 'id \\t
    Predicted_...' header); with `task`, each value checked to be one of the task's (value_problem)."""
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
        problem = value_problem(task, preds[parts[0]]) if task is not None else None
        if problem:
            raise MinbertError(f"{path}: line {n} (id {parts[0]}): prediction {parts[1]!r} {problem}")
    return preds, duplicated


def value_problem(task, value):
    """Why `value` is no prediction of `task` (a class of SST's 0-4 or CFIMDB's and Quora's 0-1; a finite
    similarity within STS's 0-5), or None."""
    t = TASKS[task]
    if t.kind == "regression":
        low, high = t.label_range
        if not (math.isfinite(value) and low <= value <= high):
            return f"is outside {task.upper()}'s similarity range, {low:g} to {high:g}"
    elif not math.isfinite(value) or value != int(value) or not 0 <= value < t.num_labels:
        return f"is not one of {task.upper()}'s classes, 0 to {t.num_labels - 1}"
    return None


def score_file(pred_path, gold_path, task=None):
    """Score a prediction file against a labelled course CSV; report missing, duplicated, unknown ids, and
    (`undefined`) why the metric has no value: Pearson r of predictions (or gold scores) that are all one
    value."""
    require_file(pred_path, f"--score {pred_path}", "prediction file")
    require_file(gold_path, f"--score ... {gold_path}", "labelled CSV (the gold file)")
    task = task or guess_task(gold_path)
    label = TASKS[task].label_col
    header = text_lines(read_text(gold_path, "labelled CSV")[:10000])[:1] if Path(gold_path).is_file() else []
    if header and label not in [h.strip() for h in header[0].split("\t")]:
        raise MinbertError(f"{gold_path}: no {label} column, so no labels to score against (a test file has none): "
                           f"give the labelled dev or train file of {task}")
    gold = {e.id: e.label for e in read_examples(gold_path, task, "dev", log=lambda *_: None)}
    preds, duplicated = read_predictions(pred_path, task)
    missing = [i for i in gold if i not in preds]
    unknown = [i for i in preds if i not in gold]
    scored = [i for i in gold if i in preds and gold[i] is not None]  # unlabelled gold rows: not scored
    metric = "pearson" if TASKS[task].kind == "regression" else "accuracy"
    result = {"task": task, "metric": metric, "n": len(scored),
              metric: score(task, [preds[i] for i in scored],
                            [gold[i] for i in scored]) if scored else float("nan"),
              "missing": missing, "duplicated": duplicated, "unknown": unknown, "undefined": None}
    for values, what in (([preds[i] for i in scored], "prediction"), ([gold[i] for i in scored], "gold score")):
        if metric == "pearson" and len(set(values)) == 1:  # no spread, so no correlation: not r = 0
            result.update(pearson=float("nan"), undefined=f"every {what} is {values[0]:g}, so there is no "
                                                          "correlation to measure")
    return result


def guess_task(path):
    name = Path(path).name.lower()
    for key, task in (("sst", "sst"), ("cfimdb", "cfimdb"), ("quora", "quora"), ("para", "quora"),
                      ("sts", "sts")):
        if key in name:
            return task
    raise MinbertError(f"{path}: cannot tell the task from the file name; pass --task")


def to_predictions(task, outputs):
    if task == "sst":
        return outputs.argmax(-1)
    if task == "quora":
        return (outputs > 0).astype(np.int64)  # logit > 0  <=>  probability > 0.5
    return outputs


def multitask_mean(scores):
    """The leaderboard's overall score: mean of SST acc, Quora acc and (STS r + 1) / 2."""
    return (scores["sst"] + scores["quora"] + (scores["sts"] + 1) / 2) / 3


def format_scores(s):
    return (f"SST acc {s['sst']:.3f}, Quora acc {s['quora']:.3f}, STS r {s['sts']:.3f}, "
            f"mean {multitask_mean(s):.3f}")


def output_name(task, split):
    """A Part 2 leaderboard file's name (in a run folder, in predictions/, in ensemble.py's output)."""
    return f"{TASK_PREFIX[task]}-{split}-output.csv"
