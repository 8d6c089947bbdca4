"""gpt2/classifier.py: the handout's command, run from the gpt2 folder, writes the handout's files with every id
of the course files; an interrupted run resumed writes what the uninterrupted one does."""
import subprocess
import sys

import pytest

from minbert.course_data import data_file, read_examples
from tests.course import ROOT
from tests.processes import interrupt_second_epoch, run_main


def _args(tmp_path, data, model, *extra):
    return ["--pretrained", str(model), "--data_dir", str(data), "--epochs", "2", "--run_dir", str(tmp_path / "run"),
            "--predictions_dir", str(tmp_path / "pred"), *extra]


@pytest.mark.parametrize("mode, prefix, extra", [("full-model", "finetune", []), ("last-linear-layer", "pretrain", []),
                                                 ("lora", "lora", ["--merge"])])
def test_the_handouts_command_writes_every_id(tmp_path, course_data, tiny_gpt2, mode, prefix, extra):
    out = run_main("gpt2/classifier.py", "--fine-tune-mode", mode, "--lr", "1e-3",
                   *_args(tmp_path, course_data, tiny_gpt2), *extra, cwd=ROOT / "gpt2")
    assert out.returncode == 0, out.stderr[-3000:]
    assert ("merged 4 adapters" in out.stdout) == (mode == "lora")  # 2 layers x (query, value), before predicting
    for name in ("sst", "cfimdb"):
        for split in ("dev", "test"):
            lines = (tmp_path / "pred" / f"{prefix}-{name}-{split}-out.csv").read_text().splitlines()
            ids = [e.id for e in read_examples(data_file(course_data, name, split), name, split)]
            assert lines[0] == "id , Predicted_Sentiment" and [l.split(" , ")[0] for l in lines[1:]] == ids


def test_a_resumed_run_writes_what_an_uninterrupted_one_does(tmp_path, course_data, tiny_gpt2, monkeypatch):
    from gpt2 import classifier
    args = ["--fine-tune-mode", "full-model", "--lr", "1e-3", "--datasets", "sst", "--amp", "none"]
    classifier.main(_args(tmp_path / "straight", course_data, tiny_gpt2, *args))
    restore = interrupt_second_epoch(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        classifier.main(_args(tmp_path / "cut", course_data, tiny_gpt2, *args))
    restore()
    classifier.main(_args(tmp_path / "cut", course_data, tiny_gpt2, *args, "--resume"))
    for split in ("dev", "test"):
        assert (tmp_path / "cut" / "pred" / f"finetune-sst-{split}-out.csv").read_bytes() == \
            (tmp_path / "straight" / "pred" / f"finetune-sst-{split}-out.csv").read_bytes()


def test_from_its_folder_the_run_and_the_predictions_go_under_gpt2(tmp_path, course_data, tiny_gpt2):
    """With no --run_dir or --predictions_dir: gpt2/runs/gpt2-classifier-TIMESTAMP/ and gpt2/predictions/ (of a
    copy of the project, so that the test writes nothing into this one)."""
    import shutil
    project = tmp_path / "project"
    top = {".venv", ".git", "data", "runs", "predictions", "tests", "benchmarks", "checkpoints", "reports", "pretrained"}
    shutil.copytree(ROOT, project, ignore=lambda folder, names: [
        n for n in names if n == "__pycache__" or (folder in (str(ROOT), str(ROOT / "gpt2")) and n in top)])
    out = subprocess.run([sys.executable, "classifier.py", "--pretrained", str(tiny_gpt2), "--data_dir", str(course_data),
                          "--epochs", "1", "--datasets", "sst"], cwd=project / "gpt2", capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-3000:]
    runs = list((project / "gpt2" / "runs").glob("gpt2-classifier-*/pretrain-sst.pt"))
    assert len(runs) == 1 and (project / "gpt2" / "predictions" / "pretrain-sst-dev-out.csv").is_file()
