"""checkpoint.py: checkpoints hold data, not code. A crafted file whose pickle would create a file is refused in
one line by every command that reads checkpoints, and the file is never created; a checkpoint of the earlier
format (the whole args namespace pickled, pathlib paths in it) is read and converted."""
import pathlib
import subprocess
import sys

import pytest
import torch

import multitask_classifier as mt
from checkpoint import ModelSpec, load_checkpoint, plain
from conftest import ROOT, part2_args
from utils import MinbertError


class _Touch:
    """Unpickling this would run pathlib.Path.touch(marker): code chosen by the file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


class _Open:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def _cli(script, *args, cwd=ROOT):
    return subprocess.run([sys.executable, str(ROOT / script), *args], cwd=cwd, capture_output=True, text=True)


def _refused(out):
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and "refused: the file holds Python objects that loading would have to run" in err[0], err


def test_a_crafted_checkpoint_executes_nothing_anywhere(tmp_path, course_data, tiny_model):
    payload, marker = _Touch, tmp_path / "pwned"
    trained = tmp_path / "run"
    mt.main(part2_args(trained, course_data, tiny_model, "--epochs", "1"))
    good = torch.load(trained / "ck" / "mt.pt", weights_only=True)
    evil = trained / "ck" / "evil.pt"
    torch.save({**good, "extra": payload(marker)}, evil)
    _refused(_cli("multitask_classifier.py", *part2_args(tmp_path / "e", course_data, tiny_model), "--eval_only", str(evil)))
    _refused(_cli("ensemble.py", str(evil), str(trained / "ck" / "mt.pt"), "--data_dir", str(course_data),
                  "--run_dir", str(tmp_path / "ens"), "--out", str(tmp_path / "ens-out")))
    _refused(_cli("report.py", str(evil), "--out", str(tmp_path / "report")))
    # --resume reads the run's '-last' checkpoint
    last = trained / "ck" / "mt-last.pt"
    torch.save({**torch.load(last, weights_only=True), "extra": payload(marker)}, last)
    _refused(_cli("multitask_classifier.py", *part2_args(trained, course_data, tiny_model, "--epochs", "2"), "--resume"))
    assert not marker.exists()


def test_any_code_in_a_pickle_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    for payload in (_Touch, _Open):
        path = tmp_path / f"{payload.__name__}.pt"
        torch.save({"format": "minbert-checkpoint", "version": 2, "x": payload(marker)}, path)
        with pytest.raises(MinbertError, match="refused: the file holds Python objects that loading would have to run"):
            load_checkpoint(path)
    assert not marker.exists()


def test_damaged_and_foreign_files_are_one_line(tmp_path):
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(MinbertError, match=r"junk.pt: cannot read checkpoint \(damaged, or not a file torch.save wrote"):
        load_checkpoint(junk)
    weights = tmp_path / "weights.pt"
    torch.save({"w": torch.zeros(2)}, weights)
    with pytest.raises(MinbertError, match="not a minbert checkpoint"):
        load_checkpoint(weights)
    with pytest.raises(MinbertError, match="checkpoint not found"):
        load_checkpoint(tmp_path / "absent.pt")


def test_an_earlier_format_checkpoint_is_converted(tmp_path, course_data, tiny_model, capsys):
    """What the earlier code wrote: {'model', 'args': vars(args) with a pathlib path, 'epoch', 'scores'}."""
    trained = tmp_path / "run"
    scores = mt.main(part2_args(trained, course_data, tiny_model, "--epochs", "1", "--pooling", "cls"))
    new = torch.load(trained / "ck" / "mt.pt", weights_only=True)
    old = trained / "ck" / "old.pt"
    torch.save({"model": new["model"], "epoch": 0, "scores": scores,
                "args": {"pretrained": str(tiny_model), "pair_encoding": "cross", "pooling": "cls",
                         "fine_tune_mode": "full-model", "task_dropout": None, "hidden_dropout_prob": 0.1,
                         "max_length": 128, "run_dir": pathlib.Path(trained), "explicit": {"pretrained"},
                         "lora_rank": 8, "lora_alpha": 16.0, "lora_targets": ["query", "value"], "pals": False,
                         "pals_dim": None, "siamese_proj": 0}}, old)
    state = load_checkpoint(old)
    assert state["pipeline"] == "multitask" and ModelSpec.from_dict(state["spec"]).pooling == "cls"
    rescored = mt.main(part2_args(tmp_path / "e", course_data, tiny_model) + ["--eval_only", str(old)])
    assert rescored == pytest.approx(scores)
    converted = tmp_path / "new.pt"
    out = _cli("checkpoint.py", "--convert", str(old), str(converted))
    assert out.returncode == 0 and load_checkpoint(converted)["spec"] == state["spec"]


def test_plain_values_only():
    assert plain({"a": pathlib.Path("x"), "b": (1, 2), "c": {3, 1}}) == {"a": "x", "b": [1, 2], "c": [1, 3]}
    with pytest.raises(TypeError, match="not plain data"):
        plain({"f": object()})
