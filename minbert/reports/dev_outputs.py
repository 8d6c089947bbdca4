"""What a run folder keeps of its dev predictions, read for `report.py --compare`: per task, the labelled dev
examples' ids and gold labels (which say what dev set it is) and the per-example statistics its metric sums
(significance.py).

Where they come from, the first found:
  - the raw dev outputs every pipeline writes beside its checkpoint, `*-dev-scores.npz`
    (evaluation.write_dev_scores: Part 1, Part 2, GPT-2's Part 1 and its cloze paraphrase task);
  - the dev leaderboard files (`sst-dev-output.csv`, ..., Part 1's `MODE-sst-dev-out.csv`: all an ensemble's
    folder keeps), scored against the course's dev CSVs in --data_dir;
  - a sonnet run's `generated_sonnets_dev.txt`, scored with chrF against the true dev sonnets it was scored
    against: the file its checkpoint records (runs/identity.py: path and sha256), or --data_dir's with the
    same bytes.
Nothing here writes: a run folder is only read.
"""
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from minbert.cli import MinbertError
from minbert.course_data import DATA_DIR, TASKS, data_file, read_examples, read_sonnets
from minbert.files import file_digest
from minbert.reports.read import load_scores
from minbert.reports.significance import ACCURACY, CHRF, PEARSON, accuracy_stats, chrf_stats, pearson_stats
from minbert.runs.folders import pipeline_of, recorded_flags
from minbert.runs.lock import a_run_of, still_running
from minbert.scoring import output_name, read_predictions

# What each task's row is called and the metric it is compared on, in the order rows are shown.
METRICS = {"sst": ("SST accuracy", ACCURACY), "cfimdb": ("CFIMDB accuracy", ACCURACY),
           "quora": ("Quora accuracy", ACCURACY), "sts": ("STS Pearson r", PEARSON),
           "sonnets": ("sonnet chrF", CHRF)}
SONNETS_DEV, TRUE_DEV = "generated_sonnets_dev.txt", "TRUE_sonnets_held_out_dev.txt"


@dataclass
class DevOutputs:
    """One task's labelled dev examples as a run predicted them."""
    task: str
    ids: np.ndarray     # the examples' ids (sonnets: their numbers), in the file's order
    gold: np.ndarray    # their gold labels (sonnets: the true sonnets' texts)
    stats: np.ndarray   # [n, k] the statistics the task's metric sums (significance.py)
    source: Path        # the file they were read from

    @property
    def metric(self):
        return METRICS[self.task][1]

    @property
    def value(self):
        return float(self.metric.value(self.stats.sum(0), len(self.stats)))


@dataclass
class RunOutputs:
    """A run folder's dev outputs, {task: DevOutputs}, and (read when asked) the flags that define it."""
    folder: Path
    tasks: dict
    _flags: object = field(default=None, repr=False)

    @property
    def name(self):
        return self.folder.name

    def flags(self):
        """The run-defining flags its folder's mark records (runs/folders.recorded_flags), or None where it
        records none (an ensemble's folder, or a run of a minbert before the mark held them)."""
        if self._flags is None:
            self._flags = recorded_flags(self.folder) or {}
        return self._flags or None


def read_run(target, data_dir=DATA_DIR):
    """The dev outputs of the run folder `target`; every problem is one line naming the folder or file."""
    folder = Path(target)
    if not folder.exists():
        raise MinbertError(f"{folder}: no such run folder")
    if not folder.is_dir():
        raise MinbertError(f"{folder}: a file; give the folder of the run it belongs to ({folder.parent})")
    if not os.access(folder, os.R_OK | os.X_OK):
        raise MinbertError(f"{folder}: cannot read this folder (permission denied)")
    tasks = {}
    for path in sorted(folder.glob("*-dev-scores.npz")):
        outputs = from_scores(path)
        if outputs.task in tasks:
            raise MinbertError(f"{folder}: two dev-scores files for {outputs.task} "
                               f"({tasks[outputs.task].source.name}, {path.name}): compare one model at a "
                               "time (copy one into a folder of its own)")
        tasks[outputs.task] = outputs
    for task in ("sst", "cfimdb", "quora", "sts"):
        if task not in tasks:
            files = [folder / output_name(task, "dev")] if task != "cfimdb" else []
            files += sorted(folder.glob(f"*-{task}-dev-out.csv"))
            files = [p for p in files if p.is_file()]
            if files:
                tasks[task] = from_predictions(files[0], task, data_dir)
    if (folder / SONNETS_DEV).is_file():
        tasks["sonnets"] = from_sonnets(folder, data_dir)
    if not tasks:
        wrote = pipeline_of(folder)
        if wrote == "pretrain":  # a finished one too: its score is in its log, on no dev set
            raise MinbertError(f"{folder}: the folder of a pretrain.py run, which writes no dev outputs (its "
                               "held-out masked-token accuracy is in its log: python report.py FOLDER draws it); "
                               "compare the runs fine-tuned from it")
        running = still_running(folder)
        raise MinbertError(f"{folder}: no dev outputs (no *-dev-scores.npz, dev prediction file or "
                           f"{SONNETS_DEV}): " + (f"the folder of {a_run_of(wrote)} still training ({running}); "
                                                   "a run writes them when it ends" if running else
                                                   f"the folder of {a_run_of(wrote)} that did not finish" if wrote
                                                   else "not a run folder, or its run did not finish"))
    return RunOutputs(folder, dict(sorted(tasks.items(), key=lambda kv: list(METRICS).index(kv[0]))))


def task_outputs(task, ids, gold, pred, source):
    """DevOutputs of the labelled rows (gold not NaN), the predictions checked to be numbers."""
    if task not in METRICS or task == "sonnets":
        known = ", ".join(t for t in METRICS if t != "sonnets")
        raise MinbertError(f"{source}: task {task!r} is none of {known}")
    gold, pred = np.asarray(gold, dtype=np.float64), np.asarray(pred, dtype=np.float64)
    labelled = ~np.isnan(gold)
    bad = np.flatnonzero(labelled & ~np.isfinite(pred))
    if len(bad):
        raise MinbertError(f"{source}: {len(bad)} of {int(labelled.sum())} dev predictions are not numbers "
                           f"(NaN, first at id {ids[bad[0]]}): the run diverged; nothing to compare")
    ids, gold, pred = np.asarray(ids).astype(str)[labelled], gold[labelled], pred[labelled]
    stats = pearson_stats(pred, gold) if TASKS[task].kind == "regression" else accuracy_stats(pred, gold)
    return DevOutputs(task, ids, gold, stats, source)


def from_scores(path):
    s = load_scores(path)  # np.load without pickles: a crafted file is one line, never run
    missing = [k for k in ("task", "ids", "gold", "pred") if k not in s]
    if missing:
        raise MinbertError(f"{path}: not a dev-scores file (no {', '.join(missing)} in it)")
    if not len(s["ids"]) == len(s["gold"]) == len(s["pred"]):
        raise MinbertError(f"{path}: {len(s['ids'])} ids, {len(s['gold'])} gold labels and {len(s['pred'])} "
                           "predictions: a damaged file")
    return task_outputs(str(s["task"]), s["ids"], s["gold"], s["pred"], path)


def from_predictions(path, task, data_dir):
    """A dev leaderboard file scored against the course's dev CSV of its task in `data_dir`."""
    gold_path = data_file(data_dir, task, "dev")
    if not gold_path.is_file():
        raise MinbertError(f"{path}: a prediction file without the run's raw dev outputs; scoring it needs "
                           f"the course's {gold_path.name}, not in --data_dir {data_dir}")
    examples = read_examples(gold_path, task, "dev", log=lambda *_: None)
    preds, _ = read_predictions(path, task)
    missing = [e.id for e in examples if e.id not in preds]
    if missing:
        raise MinbertError(f"{path}: no prediction for {len(missing)} of the {len(examples)} ids of "
                           f"{gold_path} (first: {missing[0]}): not that dev set")
    gold = [np.nan if e.label is None else float(e.label) for e in examples]
    return task_outputs(task, [e.id for e in examples], gold, [preds[e.id] for e in examples], path)


def from_sonnets(folder, data_dir):
    """The run's dev completions, each sonnet's chrF statistics against the true dev sonnet of its number."""
    recorded = ((recorded_flags(folder) or {}).get("inputs") or {}).get("true dev sonnets")
    true_path = Path(data_dir) / TRUE_DEV
    if recorded and Path(recorded["path"]).is_file():
        true_path = Path(recorded["path"])
    if not true_path.is_file():
        raise MinbertError(f"{folder / SONNETS_DEV}: scoring it needs the true dev sonnets, {TRUE_DEV}: not "
                           f"in --data_dir {data_dir}" + (f" nor at {recorded['path']}" if recorded else ""))
    if recorded and file_digest(true_path) != recorded["sha256"]:
        raise MinbertError(f"{true_path}: other true dev sonnets than the ones "
                           f"{folder.name} was scored against ({recorded['path']})")
    true = dict(read_sonnets(true_path))
    generated = read_sonnets(folder / SONNETS_DEV)
    stray = [n for n, _ in generated if n not in true]
    if stray:
        raise MinbertError(f"{folder / SONNETS_DEV}: sonnet {stray[0]} has no true sonnet in {true_path}")
    ids = np.array([n for n, _ in generated])
    refs = [true[n] for n in ids]
    return DevOutputs("sonnets", ids, np.array(refs), chrf_stats([t for _, t in generated], refs),
                      folder / SONNETS_DEV)


def aligned(a, b):
    """`b` (DevOutputs of one task) in `a`'s order of examples, refused in one line when the two are not the
    same dev set: other ids, or the same ids with other gold labels."""
    if len(a.ids) != len(b.ids) or set(a.ids) != set(b.ids):
        only = sorted(set(a.ids) ^ set(b.ids))
        raise MinbertError(f"{b.source}: not the dev set of {a.source} ({len(b.ids)} labelled examples "
                           f"against {len(a.ids)}; id {only[0] if only else '?'} is in one only): runs on "
                           "other dev sets cannot be compared example by example")
    where = {i: k for k, i in enumerate(b.ids)}
    order = np.array([where[i] for i in a.ids])
    gold = b.gold[order]
    if gold.dtype.kind == "f":  # a dev-scores file keeps the labels as the model saw them, in float32
        differ = ~np.isclose(a.gold, gold, rtol=1e-6, atol=1e-6)
    else:
        differ = a.gold != gold
    if differ.any():
        k = int(np.flatnonzero(differ)[0])
        raise MinbertError(f"{b.source}: the same dev ids as {a.source} with other gold labels (id "
                           f"{a.ids[k]}: {str(gold[k])[:40]!r} against {str(a.gold[k])[:40]!r}): another "
                           "version of the dev data")
    return DevOutputs(b.task, a.ids, a.gold, b.stats[order], b.source)


