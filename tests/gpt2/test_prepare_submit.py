"""gpt2/prepare_submit.py: the zip holds the files the GPT-2 handout lists and the code that runs them: unzipped
into an empty folder, the GPT-2 sanity check runs there."""
import subprocess
import sys
import zipfile

import pytest

from evaluation import write_predictions
from gpt2 import prepare_submit as gpt2_prepare_submit
from gpt2.sonnets import write_sonnets
from gpt2.submission import CODE, PART1, PART2
from minbert.course_data import data_file, read_examples
from minbert.submit import split_of
from tests.course import ROOT, write_course_data
from tests.processes import run_main
from utils import MinbertError


def _gpt2_project(tmp_path):
    """A copy of the project's code with gpt2/predictions/ holding both parts' files, every id present."""
    import shutil
    top = {".venv", ".git", "data", "runs", "predictions", "tests", "benchmarks", "checkpoints", "reports", "pretrained"}
    shutil.copytree(ROOT, tmp_path, ignore=lambda folder, names: [
        n for n in names if n == "__pycache__" or (folder in (str(ROOT), str(ROOT / "gpt2")) and n in top)])
    write_course_data(tmp_path / "data")
    (tmp_path / "data" / "sonnets_held_out.txt").write_text("Sonnets\n\n7\na\nb\nc\n")
    pred = tmp_path / "gpt2" / "predictions"
    pred.mkdir(parents=True)
    for n in PART1 + PART2[:2]:
        task, split = split_of(n)
        ids = [e.id for e in read_examples(data_file(tmp_path / "data", task, split), task, split)]
        write_predictions(pred / n, task, ids, [1] * len(ids))
    write_sonnets(pred / "generated_sonnets.txt", [("7", "\n".join(["a", "b", "c"] + ["x"] * 11))])
    return tmp_path


def test_the_zip_holds_the_listed_files_and_runs_on_its_own(tmp_path, tiny_gpt2):
    root = _gpt2_project(tmp_path / "project")
    out = run_main("gpt2/prepare_submit.py", "--root", str(root), cwd=ROOT / "gpt2")
    assert out.returncode == 0, out.stderr[-2000:]
    names = set(zipfile.ZipFile(root / "cs224n_default_final_project_submission.zip").namelist())
    assert set(CODE) | {f"gpt2/predictions/{n}" for n in PART1 + PART2} <= names
    assert "minbert/hub.py" in names and not any(n.startswith(("data/", "tests/")) for n in names)
    unzipped = tmp_path / "unzipped"
    zipfile.ZipFile(root / "cs224n_default_final_project_submission.zip").extractall(unzipped)
    ran = subprocess.run([sys.executable, "sanity_check.py", "--pretrained", str(tiny_gpt2)], cwd=unzipped / "gpt2",
                         capture_output=True, text=True)
    assert ran.returncode == 0 and "correct" in ran.stdout, ran.stderr[-2000:]


def test_a_short_sonnet_or_a_missing_file_is_named(tmp_path):
    root = _gpt2_project(tmp_path / "project")
    write_sonnets(root / "gpt2" / "predictions" / "generated_sonnets.txt", [("7", "a\nb\nc")])
    (root / "gpt2" / "predictions" / "para-test-output.csv").unlink()
    out = run_main("gpt2/prepare_submit.py", "--root", str(root), "--part", "2", cwd=ROOT / "gpt2")
    assert out.returncode == 2 and out.stderr.startswith("error: not zipping, Build GPT-2 Part 2 needs:")
    assert "gpt2/predictions/para-test-output.csv (missing)" in out.stderr
    assert "gpt2/predictions/generated_sonnets.txt (sonnet 7 is not 14 lines)" in out.stderr
    assert not (root / "cs224n_default_final_project_submission.zip").exists()
    for p in (root / "gpt2" / "predictions").iterdir():  # none at all: what each part needs, by name
        p.unlink()
    with pytest.raises(MinbertError, match=r"no prediction files in .*gpt2/predictions \(Part 1 needs "
                                           r"finetune-sst-dev-out.csv, finetune-sst-test-out.csv, "
                                           r"finetune-cfimdb-dev-out.csv, finetune-cfimdb-test-out.csv; Part 2 needs "
                                           r"para-dev-output.csv, para-test-output.csv, generated_sonnets.txt\): run "
                                           r"gpt2/classifier.py \(Part 1\)"):
        gpt2_prepare_submit.main(["--root", str(root)])


def test_binary_bytes_in_a_prediction_or_sonnets_file_are_named(tmp_path):
    root = _gpt2_project(tmp_path / "project")
    pred = root / "gpt2" / "predictions"
    (pred / "generated_sonnets.txt").write_bytes(b"\xff\xfe\x00garbage\x80")
    (pred / "para-dev-output.csv").write_bytes(b"id , Predicted_Is_Paraphrase\n\xff\x00\x80 , 1\n")
    out = run_main("gpt2/prepare_submit.py", "--root", str(root), "--part", "2", cwd=ROOT / "gpt2")
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, out.stderr[-2000:]
    for name in ("para-dev-output.csv", "generated_sonnets.txt"):
        assert f"gpt2/predictions/{name} (not text: binary bytes where its script writes UTF-8 lines" in out.stderr
    assert not (root / "cs224n_default_final_project_submission.zip").exists()
