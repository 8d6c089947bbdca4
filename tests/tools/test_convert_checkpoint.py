"""tools/convert_checkpoint.py: a checkpoint of the earlier format (the whole namespace pickled, pathlib paths among
its values) written in the current one, read without running anything; an existing destination is never
overwritten, nor is one written into another run's folder or the package."""
import pathlib

import pytest
import torch

from minbert.runs.checkpoint import FORMAT, load_checkpoint
from minbert.runs.lock import RUN_MARK
from tests.course import ROOT
from tests.processes import one_line_error, run_main
from tools import convert_checkpoint
from utils import MinbertError


def test_an_earlier_checkpoint_is_written_in_the_current_format(tmp_path):
    old, new = tmp_path / "old.pt", tmp_path / "new.pt"
    torch.save({"model": {"classifier.weight": torch.zeros(2, 4)}, "epoch": 3, "scores": {"acc": 0.5},
                "args": {"pretrained": "all-minilm-l6-v2", "fine_tune_mode": "full-model", "hidden_dropout_prob": 0.3,
                         "max_length": 64, "run_dir": pathlib.Path(tmp_path)}}, old)
    out = run_main("tools/convert_checkpoint.py", "--convert", str(old), str(new))
    assert out.returncode == 0, out.stderr
    state = load_checkpoint(new)
    assert state["format"] == FORMAT and state["pipeline"] == "classifier" and state["epoch"] == 3
    assert state["spec"]["num_labels"] == 2 and state["spec"]["max_length"] == 64
    assert "converted_from" not in torch.load(new, weights_only=True)
    one_line_error(run_main("tools/convert_checkpoint.py", "--convert", str(old), str(new)),
                   "exists; the converter does not overwrite files")


def test_the_new_checkpoint_never_goes_into_another_runs_folder_or_the_package(tmp_path):
    """NEW.pt inside a run folder (whose files belong to its checkpoint and log) or among the code is one line,
    before the old checkpoint is even read."""
    run = tmp_path / "runs" / "b"
    run.mkdir(parents=True)
    (run / RUN_MARK).write_text("{}\n")
    for new, why in ((run / "conv.pt", r"inside .*runs/b, the folder of another run"),
                     (ROOT / "minbert" / "conv.pt", "among the project's code, docs or data")):
        with pytest.raises(MinbertError, match=rf"--convert NEW.pt .*conv.pt: {why}"):
            convert_checkpoint.main(["--convert", str(tmp_path / "missing.pt"), str(new)])
        assert not new.exists()
