"""reports/read.py: a target names its logs (a run folder, a checkpoint, a log), and a run's best epoch is the one
its pipeline kept (NaN epochs passed over)."""
import json

import pytest
import torch

from minbert.reports.read import Run, logs_of
from minbert.runs.checkpoint import save_checkpoint
from utils import MinbertError


def test_a_folder_a_checkpoint_or_a_log_names_its_logs(tmp_path):
    (tmp_path / "mt-log.jsonl").write_text("")
    save_checkpoint(tmp_path / "mt.pt", {"format": "minbert-checkpoint", "version": 2, "model_name": "mt",
                                         "model": {"w": torch.zeros(1)}})
    (tmp_path / "mt-last.pt").write_bytes((tmp_path / "mt.pt").read_bytes())
    assert logs_of(tmp_path) == [tmp_path / "mt-log.jsonl"]
    assert logs_of(tmp_path / "mt.pt") == logs_of(tmp_path / "mt-last.pt") == [tmp_path / "mt-log.jsonl"]
    with pytest.raises(MinbertError, match="gone.pt: no such checkpoint"):
        logs_of(tmp_path / "gone.pt")
    (tmp_path / "renamed.pt").write_bytes((tmp_path / "mt.pt").read_bytes())
    with pytest.raises(MinbertError, match=r"renamed.pt: no log beside this checkpoint \(renamed-log.jsonl\)"):
        logs_of(tmp_path / "renamed.pt")
    assert logs_of(tmp_path / "mt-log.jsonl") == [tmp_path / "mt-log.jsonl"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(MinbertError, match=r"empty: no run log \(\*.jsonl\) in this folder$"):
        logs_of(tmp_path / "empty")
    (tmp_path / "empty" / ".minbert-run").write_text('{"pipeline": "ensemble"}')  # the mark an ensemble leaves
    with pytest.raises(MinbertError, match=r"no run log .*: the folder of an ensemble.py run, which trains nothing"):
        logs_of(tmp_path / "empty")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(MinbertError, match="not a run folder, a checkpoint"):
        logs_of(tmp_path / "notes.txt")


def test_the_best_epoch_passes_over_nan_and_the_pretraining_start(tmp_path):
    rows = [{"epoch": -1, "pipeline": "pretrain", "dev_score": 0.9, "dev": {}},
            {"epoch": 0, "pipeline": "pretrain", "dev_score": float("nan"), "dev": {}},
            {"epoch": 1, "pipeline": "pretrain", "dev_score": 0.4, "dev": {}}]
    run = Run(tmp_path / "pretrain-log.jsonl", rows)
    assert run.best[0] == 1  # epoch -1 is the starting point, not a trained epoch
    nan = Run(tmp_path / "x-log.jsonl", [{**rows[1], "pipeline": "multitask"}])
    assert nan.best == (None, None)
    assert json.dumps(rows[2])  # plain data
