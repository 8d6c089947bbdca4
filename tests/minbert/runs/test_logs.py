"""runs/logs.py: a run's log read in the one schema, the earlier per-pipeline formats converted, the line saying why
a run stopped kept out of the epochs, and a cut or foreign line named by its number."""
import json

import pytest

from minbert.runs.logs import read_log
from utils import MinbertError


def _write(path, records):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_every_schema_reads_as_one(tmp_path):
    log = _write(tmp_path / "a-log.jsonl", [
        {"epoch": 0, "dev_mean": 0.5, "dev": {"sst": 0.4}},                         # multitask, earlier
        {"epoch": 1, "dev_acc": 0.6, "dev_f1": 0.5, "train_acc": 0.7},              # classifier, earlier
        {"epoch": 2, "masked_acc": 0.3, "masked_loss": 4.0},                        # pretrain, earlier
        {"epoch": 3, "pipeline": "multitask", "dev_score": 0.7, "dev": {"sst": 0.6}},
        {"epoch": 3, "stopped": "stopping early"}])
    records = read_log(log)
    assert [r["pipeline"] for r in records] == ["multitask", "classifier", "pretrain", "multitask"]
    assert [r["dev_score"] for r in records] == [0.5, 0.6, 0.3, 0.7]
    assert records[1]["dev"] == {"accuracy": 0.6, "f1": 0.5, "train_accuracy": 0.7}
    assert records[2]["dev"] == {"masked_acc": 0.3, "masked_loss": 4.0}


def test_a_bad_log_is_one_line_naming_its_line(tmp_path):
    with pytest.raises(MinbertError, match="log not found"):
        read_log(tmp_path / "absent.jsonl")
    cut = _write(tmp_path / "cut.jsonl", [{"epoch": 0, "pipeline": "multitask", "dev_score": 0.5}, '{"epoch": 1, "dev'])
    with pytest.raises(MinbertError, match=r"cut.jsonl: line 2: truncated or not JSON"):
        read_log(cut)
    foreign = _write(tmp_path / "foreign.jsonl", [{"loss": 1.0}])
    with pytest.raises(MinbertError, match=r"line 1: not a per-epoch record"):
        read_log(foreign)
    stopped = _write(tmp_path / "stopped.jsonl", [{"epoch": 0, "stopped": "the weights diverged"}])
    with pytest.raises(MinbertError, match="no epoch finished; the run stopped: the weights diverged"):
        read_log(stopped)
    (tmp_path / "bin.jsonl").write_bytes(b"\xff\xfe\x00\x00")
    with pytest.raises(MinbertError, match="not a text file"):
        read_log(tmp_path / "bin.jsonl")
