"""Reading runs for report.py: a model's per-epoch log (one schema for every pipeline, training/fit.py) and
the raw dev outputs beside it (`*-dev-scores.npz`)."""
from pathlib import Path

import numpy as np

from minbert.cli import MinbertError
from minbert.runs.folders import pipeline_of
from minbert.runs.lock import a_run_of

SCORE_FILES = {"sst": "sst-dev-scores.npz", "quora": "para-dev-scores.npz", "sts": "sts-dev-scores.npz"}
# The pipelines of one dataset per model, through Part 1's code (minbert/pipelines/classifier.py).
ONE_DATASET = ("classifier", "gpt2-classifier", "gpt2-paraphrase")



class Run:
    """One model's log records (the epoch protocol's schema, training/fit.py) and its dev score files."""

    def __init__(self, log_path, records):
        self.log, self.records = Path(log_path), records
        self.folder = self.log.parent
        self.kind = records[-1]["pipeline"]
        self.name = records[-1].get("run") or self.folder.name
        stem = self.log.name[:-len("-log.jsonl")] if self.log.name.endswith("-log.jsonl") else self.log.stem
        if self.kind in ONE_DATASET:
            self.dataset = records[-1].get("dataset") or stem.rsplit("-", 1)[-1]
            self.name = f"{self.name} ({self.dataset})"
            self.scores = {self.dataset: self.folder / f"{stem}-dev-scores.npz"}
        elif self.kind == "multitask":
            self.scores = {t: self.folder / f for t, f in SCORE_FILES.items()}
        else:
            self.scores = {}
        self.scores = {t: p for t, p in self.scores.items() if p.is_file()}
        # pretraining logs its starting point as epoch -1
        self.trained = [r for r in records if r["epoch"] >= 0]

    def series(self, key):
        vals = [r.get(key, r.get("dev", {}).get(key)) for r in self.records]
        return [r["epoch"] for r in self.records], [np.nan if v is None else v for v in vals]

    @property
    def best(self):
        """(epoch, record) of the best dev score, the epoch the pipelines keep; (None, None) when no epoch has
        one (every dev score NaN: the run diverged)."""
        rows = self.trained or self.records
        scores = np.array([np.nan if r["dev_score"] is None else r["dev_score"] for r in rows],
                          dtype=np.float64)
        if np.isnan(scores).all():
            return None, None
        i = int(np.nanargmax(scores))
        return rows[i]["epoch"], rows[i]


def logs_of(target):
    """The log files a command-line target names: a log, a checkpoint, or a run folder."""
    p = Path(target)
    if p.is_dir():
        logs = sorted(p.glob("*-log.jsonl")) + sorted(q for q in p.glob("*.jsonl")
                                                     if not q.name.endswith("-log.jsonl"))
        if not logs:
            wrote = pipeline_of(p)
            why = ("" if wrote is None else ": the folder of an ensemble.py run, which trains nothing and so logs "
                   "no epoch (report.py --compare takes its dev outputs)" if wrote == "ensemble" else
                   f": the folder of {a_run_of(wrote)} that logged no epoch yet")
            raise MinbertError(f"{p}: no run log (*.jsonl) in this folder{why}")
        return logs
    if p.suffix == ".pt":
        # a run names a model's checkpoints and its log after the model (STEM.pt, STEM-last.pt, STEM-log.jsonl);
        # the checkpoint itself is not opened: the log holds all a report shows, and reading it needs no torch
        if not p.is_file():
            raise MinbertError(f"{p}: no such checkpoint")
        stem = p.stem.removesuffix("-last")
        for log in (p.with_name(f"{stem}-log.jsonl"), p.with_name(f"{stem}.jsonl")):
            if log.is_file():
                return [log]
        raise MinbertError(f"{p}: no log beside this checkpoint ({stem}-log.jsonl)")
    if p.suffix == ".jsonl" or not p.exists():
        return [p]
    raise MinbertError(f"{p}: not a run folder, a checkpoint (.pt) or a log (.jsonl)")


def load_scores(path):
    """A dev-scores file's arrays (a NumPy .npz, read without pickles); any other file is one line saying what it
    is not (NumPy would suggest allow_pickle=True, which would run code from the file)."""
    with open(path, "rb") as fp:
        magic = fp.read(4)
    if magic[:2] != b"PK":
        raise MinbertError(f"{path}: not a dev-scores file (a NumPy .npz, which is a zip; this one begins "
                           f"{magic!r}): move it out of the run folder, or put back the file the run wrote")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as e:
        raise MinbertError(f"{path}: cannot read dev scores ({type(e).__name__}: {str(e)[:200]})") from None
