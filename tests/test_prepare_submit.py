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
from minbert.runs.lock import RUN_MARK
from tests.course import ROOT, write_course_data
from tests.processes import run_main
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


def test_publish_refuses_a_missing_code_file_before_copying(tmp_path):
    """--publish checks the code the zip takes with the run's files, before any file is copied: a refused
    command leaves the predictions folder as it was."""
    root = _project(tmp_path, prepare_submit.PART1)
    run = root / "runs" / "p1"
    run.mkdir(parents=True)
    (run / RUN_MARK).write_text("{}\n")
    for n in prepare_submit.PART1:
        shutil.move(root / "predictions" / n, run / n)
    (root / "bert.py").unlink()
    before = sorted(p.name for p in (root / "predictions").iterdir())
    with pytest.raises(MinbertError, match=r"not publishing or zipping, minBERT Part 1 would then need: "
                                           r"bert.py \(missing\)$"):
        prepare_submit.main(["--root", str(root), "--part", "1", "--publish", str(run)])
    assert sorted(p.name for p in (root / "predictions").iterdir()) == before  # nothing copied
    (root / "bert.py").write_text("# code\n")
    prepare_submit.main(["--root", str(root), "--part", "1", "--publish", str(run)])
    assert all((root / "predictions" / n).is_file() for n in prepare_submit.PART1)


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


def test_the_zip_holds_only_the_files_the_handout_lists_and_names_the_rest(tmp_path, capsys):
    """A model file, notes, backups and raw scores in predictions/ stay out, and so do Part 1's files with --part 2
    (unchecked, they were zipped while the line said every file was checked): one line names them."""
    root = _project(tmp_path, prepare_submit.PART2 + prepare_submit.PART1[:2])
    (root / "predictions" / "my-model.pt").write_bytes(b"\0" * 1000)
    (root / "predictions" / "notes.txt").write_text("kept\n")
    (root / "predictions" / "sst-dev-output.csv.20260101-000000.bak").write_text("old\n")
    out = prepare_submit.build(root, part="2")
    assert set(zipfile.ZipFile(out).namelist()) == {"bert.py", "classifier.py", "optimizer.py", "utils.py"} | {
        f"predictions/{n}" for n in prepare_submit.PART2}
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("(Part 2: the code and the 6 prediction files the handout lists, each checked against "
                             f"{root / 'data'}: the ids of its split)")
    assert lines[1] == ("from no run this project can find (its folder gone, or the file written elsewhere or changed "
                        "by hand): " + ", ".join(prepare_submit.PART2))
    assert lines[2] == ("left out of the zip, as not among the files the handout lists for Part 2: "
                        f"{prepare_submit.PART1[0]}, {prepare_submit.PART1[1]}, my-model.pt, notes.txt, "
                        f"sst-dev-output.csv.20260101-000000.bak, sst-dev-scores.npz (in {root / 'predictions'})")
    assert len(lines) == 3


def test_a_zip_the_project_did_not_write_is_never_replaced_without_a_word(tmp_path, capsys):
    root = _project(tmp_path, prepare_submit.PART1)
    mine = root / prepare_submit.ZIP_NAME
    mine.write_bytes(b"my own zip of last week")
    with pytest.raises(MinbertError, match=r"submission.zip: a file this project did not write .* add --backup to "
                                           r"keep it as cs224n_default_final_project_submission.zip.DATE.bak"):
        prepare_submit.build(root)
    assert mine.read_bytes() == b"my own zip of last week"
    prepare_submit.main(["--root", str(root), "--backup"])
    backups = list(root.glob(f"{prepare_submit.ZIP_NAME}.*.bak"))
    assert [b.read_bytes() for b in backups] == [b"my own zip of last week"]
    assert "kept files that no run wrote" in capsys.readouterr().out
    prepare_submit.build(root)  # the project's own zip: replaced, no second backup
    assert len(list(root.glob("*.bak"))) == 1 and zipfile.ZipFile(mine).namelist()


def test_a_publishing_cut_short_is_finished_before_zipping(tmp_path, monkeypatch):
    """Stopped among the renames, a run left predictions/ half its own: the rest is copied from its run folder
    before zipping, and the zip holds all of the run's files."""
    import types
    from minbert.runs import publishing, sources
    root = _project(tmp_path, prepare_submit.PART2)
    run = tmp_path / "run"
    run.mkdir()
    (run / ".minbert-run").write_text("{}\n")
    for n in prepare_submit.PART2:
        sources.record([root / "predictions" / n], "old", tmp_path / "old")
        lines = (root / "predictions" / n).read_text().splitlines()
        (run / n).write_text("\n".join(lines[:1] + [l.replace(" , 1", " , 0") for l in lines[1:]]) + "\n")
    proxy = types.SimpleNamespace(**{n: getattr(os, n) for n in dir(os) if not n.startswith("__")})
    renames = []

    def replace(a, b):
        renames.append(b)
        if len(renames) == 3:
            raise KeyboardInterrupt  # the process dies here
        return os.replace(a, b)
    proxy.replace = replace
    with monkeypatch.context() as m:
        m.setattr(publishing, "os", proxy)
        with pytest.raises(KeyboardInterrupt):
            publishing.publish([(run / n, root / "predictions" / n) for n in prepare_submit.PART2], "new", run)
    out = prepare_submit.build(root, part="2")
    z = zipfile.ZipFile(out)
    assert all(z.read(f"predictions/{n}") == (run / n).read_bytes() for n in prepare_submit.PART2)


def test_the_zip_holds_the_package_and_runs_on_its_own(tmp_path, course_data, tiny_model):
    """The project's real code zipped with Part 1's files, unzipped into an empty folder: the scripts run there,
    optimizer_test.py too (its reference goes in with the code)."""
    root = _project(tmp_path / "project", prepare_submit.PART1)
    for p in [*ROOT.glob("*.py"), *(ROOT / "minbert").rglob("*.py"), ROOT / "optimizer_test.npy"]:
        (root / p.relative_to(ROOT)).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(p, root / p.relative_to(ROOT))
    names = set(zipfile.ZipFile(prepare_submit.build(root)).namelist())
    assert {"minbert/__init__.py", "minbert/training/fit.py", "minbert/flags/settings.py", "optimizer_test.npy"} <= names
    assert not any(n.endswith(".pyc") or "__pycache__" in n for n in names)
    unzipped = tmp_path / "unzipped"
    zipfile.ZipFile(root / prepare_submit.ZIP_NAME).extractall(unzipped)
    # one process from the unzipped folder (its own path first, no PYTHONPATH) runs both scripts as `python
    # SCRIPT` would: a torch import saved, and a module missing from the zip still fails to import
    both = (f"import runpy, sys\n"
            f"sys.argv = ['classifier.py', '--pretrained', {str(tiny_model)!r}, '--data_dir', {str(course_data)!r}, "
            f"'--datasets', 'sst', '--epochs', '1', '--batch_size', '8', '--run_dir', 'run', '--predictions_dir', "
            f"'out']\n"
            f"runpy.run_path('classifier.py', run_name='__main__')\n"
            f"sys.argv = ['optimizer_test.py']\n"
            f"runpy.run_path('optimizer_test.py', run_name='__main__')\n"
            f"import minbert, optimizer\nprint('ran from', minbert.__file__, optimizer.__file__)\n")
    out = subprocess.run([sys.executable, "-c", both], cwd=unzipped, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": ""})
    assert out.returncode == 0, out.stderr[-2000:]
    assert (unzipped / "out" / "last-linear-layer-sst-test-out.csv").is_file()
    assert "Optimizer test passed!" in out.stdout, out.stderr[-2000:]
    ran_from = out.stdout.split("ran from ")[-1].split()
    assert ran_from == [str(unzipped / "minbert" / "__init__.py"), str(unzipped / "optimizer.py")]


@pytest.mark.parametrize("script", ["prepare_submit.py", "gpt2/prepare_submit.py"])
def test_a_root_that_is_not_a_folder_is_named(tmp_path, script):
    """Both projects' commands, one check: nothing there, or a file (it had been "no such folder" in Build GPT-2)."""
    (tmp_path / "afile").write_text("x\n")
    for name, what in (("missing", "no such folder"), ("afile", "a file")):
        out = run_main(script, "--root", str(tmp_path / name))
        assert out.returncode == 2 and out.stderr.strip() == (f"error: --root {tmp_path / name}: {what}; give the "
                                                              "project folder")


def test_one_projects_zip_never_replaces_the_others_without_a_word(tmp_path, capsys):
    """Both handouts name the same zip: Build GPT-2's prepare_submit.py refuses to replace minBERT's (and the
    reverse), or keeps it as a dated backup with --backup."""
    from gpt2.submission import GPT2
    root = _project(tmp_path, prepare_submit.PART1)
    prepare_submit.build(root)
    for n in GPT2.parts["1"]:
        (root / GPT2.predictions / n).parent.mkdir(parents=True, exist_ok=True)
        (root / GPT2.predictions / n).write_bytes((root / "predictions" / n.replace("finetune", "full-model")
                                                   .replace("pretrain", "last-linear-layer")).read_bytes())
    for c in GPT2.code["1"]:
        (root / c).parent.mkdir(parents=True, exist_ok=True)
        (root / c).write_text("# code\n")
    minbert_zip = (root / prepare_submit.ZIP_NAME).read_bytes()
    with pytest.raises(MinbertError, match=r"the zip prepare_submit.py \(minBERT\) wrote, which this one "
                                           r"\(prepare_submit.py \(Build GPT-2\)\) would replace"):
        prepare_submit.build(root, project=GPT2, part="1")
    assert (root / prepare_submit.ZIP_NAME).read_bytes() == minbert_zip
    with pytest.raises(MinbertError, match="cannot be checked"):  # refused for another reason: the zip stays put
        prepare_submit.build(root, project=GPT2, part="1", backup=True, data_dir=root / "no-data")
    assert (root / prepare_submit.ZIP_NAME).read_bytes() == minbert_zip
    assert not list(root.glob(f"{prepare_submit.ZIP_NAME}.*.bak"))
    prepare_submit.build(root, project=GPT2, part="1", backup=True)
    backups = list(root.glob(f"{prepare_submit.ZIP_NAME}.*.bak"))
    assert len(backups) == 1 and backups[0].read_bytes() == minbert_zip
    prepare_submit.build(root, project=GPT2, part="1")  # its own zip: replaced as before
