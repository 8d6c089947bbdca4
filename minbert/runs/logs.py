"""Reading a run's per-epoch log (the JSON-lines file training/fit.py writes, one schema for every pipeline),
and the earlier per-pipeline formats."""
import json
from pathlib import Path

from minbert.cli import MinbertError
from minbert.files import read_text

# The pipelines whose epoch logs share the one schema (training/fit.py writes them): minBERT's, and Build
# GPT-2's (gpt2/classifier.py, paraphrase_detection.py, sonnet_generation.py).
PIPELINES = ("classifier", "multitask", "pretrain", "gpt2-classifier", "gpt2-paraphrase", "gpt2-sonnet")


def _legacy(rec):
    """A record of the earlier per-pipeline log formats, in the current schema."""
    if "dev_mean" in rec:
        return {**rec, "pipeline": "multitask", "dev_score": rec["dev_mean"]}
    if "dev_acc" in rec:
        return {**rec, "pipeline": "classifier", "dev_score": rec["dev_acc"],
                "dev": {"accuracy": rec["dev_acc"], "f1": rec.get("dev_f1"),
                        "train_accuracy": rec.get("train_acc")}}
    if "masked_acc" in rec:
        return {**rec, "pipeline": "pretrain", "dev_score": rec["masked_acc"],
                "dev": {k: rec[k] for k in ("masked_acc", "masked_loss") if k in rec}}
    return rec


def read_log(path):
    path = Path(path)
    if not path.is_file():
        raise MinbertError(f"{path}: log not found")
    records, stopped = [], None
    for n, line in enumerate(read_text(path, "run log").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError:
            raise MinbertError(f"{path}: line {n}: truncated or not JSON; the run was probably cut off while "
                               f"writing it: delete that line and report again") from None
        if isinstance(rec, dict) and "stopped" in rec:
            stopped = rec["stopped"]  # the line saying why the run stopped early
            continue
        rec = _legacy(rec) if isinstance(rec, dict) else rec
        if (not isinstance(rec, dict) or "epoch" not in rec or "dev_score" not in rec
                or rec.get("pipeline") not in PIPELINES):
            raise MinbertError(f"{path}: line {n}: not a per-epoch record of classifier.py, "
                               "multitask_classifier.py, pretrain.py or a GPT-2 script (gpt2/classifier.py, "
                               "paraphrase_detection.py, sonnet_generation.py)")
        records.append(rec)
    if not records:
        raise MinbertError(f"{path}: no epoch finished" + (f"; the run stopped: {stopped}" if stopped else
                                                           " (the log is empty)"))
    return records
