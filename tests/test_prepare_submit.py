"""prepare_submit.py: the zip holds the code (the top-level files and the minbert package) and the prediction
files, each file's ids checked against its split; unzipped into an empty folder, the submitted code runs."""
import os
import shutil
import subprocess
import sys
import zipfile

import pytest

import prepare_submit
from evaluation import write_predictions
from minbert.course_data import data_file, read_examples
from tests.helpers import ROOT, cli, write_course_data
from utils import MinbertError


def _project(tmp_path, names):
    """A project folder: code, data/ in the course's layout, and prediction files for `names` holding every id
    of their split."""
    (tmp_path / "predictions").mkdir(parents=True)
    write_course_data(tmp_path / "data")
    for f in ("bert.py", "classifier.py", "optimizer.py", "utils.py"):
        (tmp_path / f).write_text("# code\n")
    (tmp_path / "notes.txt").write_text("not code")
    (tmp_path / "predictions" / ".gitkeep").write_text("")
    (tmp_path / "predictions" / ".sources.json").write_text("{}")  # which run each file came from
    (tmp_path / "predictions" / "sst-dev-scores.npz").write_bytes(b"raw dev outputs")
    for n in names:
        task, split = prepare_submit.split_of(n)
        ids = [e.id for e in read_examples(data_file(tmp_path / "data", task, split), task, split)]
        write_predictions(tmp_path / "predictions" / n, task, ids, [1] * len(ids))
    return tmp_path


def test_zip_holds_code_and_predictions_only(tmp_path):
    root = _project(tmp_path, prepare_submit.PART1)
    out = prepare_submit.build(root)
    names = set(zipfile.ZipFile(out).namelist())
    assert names == {"bert.py", "classifier.py", "optimizer.py", "utils.py"} | {f"predictions/{n}" for n in prepare_submit.PART1}


def test_zip_refuses_missing_or_empty_predictions(tmp_path):
    root = _project(tmp_path, prepare_submit.PART1[:-1])
    (root / "predictions" / prepare_submit.PART1[0]).write_text("id , Predicted_Sentiment\n")
    with pytest.raises(MinbertError) as e:
        prepare_submit.build(root)
    msg = str(e.value)
    assert f"predictions/{prepare_submit.PART1[-1]} (missing)" in msg and f"predictions/{prepare_submit.PART1[0]} (empty)" in msg
    assert not (root / prepare_submit.ZIP_NAME).exists()
    with pytest.raises(MinbertError, match="para-dev-output.csv"):
        prepare_submit.build(_project(tmp_path / "p2", []), part="2")


def test_zip_refuses_predictions_of_a_subset_or_another_split(tmp_path):
    """A run on a 48-row copy of the data writes files with 48 ids where the course's split has more."""
    root = _project(tmp_path, prepare_submit.PART2)
    path = root / "predictions" / "sst-test-output.csv"
    path.write_text("\n".join(path.read_text().splitlines()[:5]) + "\n")  # 4 of the split's ids
    with pytest.raises(MinbertError, match=r"predictions/sst-test-output.csv \(4 ids where ids-sst-test-student.csv "
                                           r"has 12, 8 missing"):
        prepare_submit.build(root, part="2")
    dev = (root / "predictions" / "sts-dev-output.csv").read_text()
    (root / "predictions" / "sts-test-output.csv").write_text(dev)  # the dev file under the test name
    with pytest.raises(MinbertError, match=r"sts-test-output.csv \(16 ids where sts-test-student.csv has 12, 12 "
                                           r"missing .*, 16 not in test"):
        prepare_submit.build(root, part="2")
    assert not (root / prepare_submit.ZIP_NAME).exists()


def test_the_submission_zip_leaves_out_backups(tmp_path, monkeypatch):
    import zipfile
    from minbert import submit
    (tmp_path / "predictions").mkdir()
    (tmp_path / "predictions" / "sst-dev-output.csv.20260101-000000.bak").write_text("old\n")
    (tmp_path / "x.py").write_text("")
    (tmp_path / "predictions" / "notes.txt").write_text("kept\n")
    monkeypatch.setattr(submit, "problems_with", lambda *a: [])
    out = prepare_submit.build(tmp_path, part="2")
    names = zipfile.ZipFile(out).namelist()
    assert "predictions/notes.txt" in names and not any(n.endswith(".bak") for n in names)


def test_the_zip_holds_the_package_and_runs_on_its_own(tmp_path, course_data, tiny_model):
    """The project's real code zipped with Part 1's files, unzipped into an empty folder: the scripts run there."""
    root = _project(tmp_path / "project", prepare_submit.PART1)
    for p in [*ROOT.glob("*.py"), *(ROOT / "minbert").rglob("*.py")]:
        (root / p.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, root / p.relative_to(ROOT))
    names = set(zipfile.ZipFile(prepare_submit.build(root)).namelist())
    assert {"minbert/__init__.py", "minbert/training/fit.py", "minbert/flags/settings.py"} <= names
    assert not any(n.endswith(".pyc") or "__pycache__" in n for n in names)
    unzipped = tmp_path / "unzipped"
    zipfile.ZipFile(root / prepare_submit.ZIP_NAME).extractall(unzipped)
    out = subprocess.run([sys.executable, "classifier.py", "--pretrained", str(tiny_model), "--data_dir",
                          str(course_data), "--datasets", "sst", "--epochs", "1", "--batch_size", "8", "--run_dir",
                          "run", "--predictions_dir", "out"], cwd=unzipped, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": ""})
    assert out.returncode == 0, out.stderr[-2000:]
    assert (unzipped / "out" / "last-linear-layer-sst-test-out.csv").is_file()


def test_a_root_that_is_not_a_folder_is_named(tmp_path):
    out = cli("prepare_submit.py", "--root", str(tmp_path / "missing"))
    assert out.returncode == 2 and out.stderr.strip() == f"error: --root {tmp_path / 'missing'}: no such folder"
