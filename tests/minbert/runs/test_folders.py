"""runs/folders.py: a run folder is one pipeline's; a folder no run wrote is refused; --run_name and
--study stay under runs/, and a name is not empty, short enough and printable; no output names an input, another output or a file in another run's folder; a file
no run wrote is never replaced without a dated backup and a line saying so."""
import json
import os
import re
import shutil
from pathlib import Path

import pytest

import classifier
import multitask_classifier as mt
import pretrain
from minbert.runs.folders import check_run_name
from tests.course import ROOT, overridden, part1_args, part2_args, snapshot
from tests.processes import interrupt_second_epoch
from utils import MinbertError


def _quick(tmp_path, data, model, *extra):
    """A two-step multitask run (the shared argument builder, shortened)."""
    return part2_args(tmp_path, data, model, "--epochs", "1", "--steps_per_epoch", "2", *extra)


def test_a_run_folder_belongs_to_one_pipeline(tmp_path, course_data, tiny_model):
    mt.main(_quick(tmp_path, course_data, tiny_model))
    before = snapshot(tmp_path / "ck")
    with pytest.raises(MinbertError, match="the run folder of a multitask_classifier.py run; a classifier.py run"):
        classifier.main(part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst"))
    with pytest.raises(MinbertError, match="--out .*ck: the run folder of a multitask_classifier.py run; a pretrain.py"):
        pretrain.main(["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--out", str(tmp_path / "ck")])
    assert snapshot(tmp_path / "ck") == before


# ----------------------------------------------------------------------------- what a run folder may be

def test_a_folder_no_run_wrote_is_refused_and_left_as_it_was(tmp_path, course_data, tiny_model, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "sst-dev-output.csv").write_text("my own file\n")
    for folder in (mine, course_data):  # a folder of the user's, and the data folder itself
        before = snapshot(folder)
        with pytest.raises(MinbertError, match=f"--run_dir {folder}: not a run folder: it holds files no run wrote"):
            mt.main(_quick(tmp_path, course_data, tiny_model, "--run_dir", str(folder)))
        assert snapshot(folder) == before
    empty = tmp_path / "empty"
    empty.mkdir()
    mt.main(_quick(tmp_path, course_data, tiny_model, "--run_dir", str(empty)))  # an empty folder is fine
    assert (empty / "mt.pt").is_file() or (empty / "multitask.pt").is_file()


def test_a_run_dir_that_is_a_named_pipe_is_named_as_one(tmp_path, course_data, tiny_model):
    """--run_dir naming a named pipe: one line saying what is there, and the pipe stays."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes on this system")
    os.mkfifo(tmp_path / "rd")
    with pytest.raises(MinbertError, match=r"--run_dir .*rd: is a named pipe, but a run folder goes there"):
        mt.main(_quick(tmp_path, course_data, tiny_model, "--run_dir", str(tmp_path / "rd")))
    assert (tmp_path / "rd").is_fifo()


@pytest.mark.parametrize("where, match", [
    ("file.txt/run", r"file.txt is a file, but the run folder would go inside it"),  # had been a traceback
    ("link", r"is a link to a file \(.*file.txt\), but a run folder goes there"),  # had been "a missing folder"
])
def test_a_run_dir_at_or_below_a_file_is_named_as_one(tmp_path, course_data, tiny_model, where, match):
    (tmp_path / "file.txt").write_text("mine\n")
    (tmp_path / "link").symlink_to(tmp_path / "file.txt")
    with pytest.raises(MinbertError, match=rf"^--run_dir .*{match}; move it or pick another name$"):
        mt.main(_quick(tmp_path, course_data, tiny_model, "--run_dir", str(tmp_path / where)))
    assert (tmp_path / "file.txt").read_text() == "mine\n"


@pytest.mark.parametrize("name", ["../../x", "../x", "/tmp/x", ".", "a/../../b", " x"])
def test_run_name_stays_under_runs(tmp_path, course_data, tiny_model, monkeypatch, name):
    work = tmp_path / "work"  # the escapes land in tmp_path (../x), beside it (../../x) or at an absolute path
    work.mkdir()
    monkeypatch.chdir(work)
    target = Path(os.path.normpath(work / "runs" / name))  # where the run would write if the name were taken
    existed = target.exists()
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    with pytest.raises(MinbertError, match=r"--run_name .*names a folder under runs/.*never one outside it"):
        mt.main(["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--run_name", name])
    assert existed or not target.exists()
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before  # nothing created anywhere here


@pytest.mark.parametrize("name,why", [("", "empty"), ("a\nb", "holds the control character '\\n'"),
                                      ("x" * 300, "300 characters; a name is at most 100"),
                                      ("x" * 101, "101 characters; a name is at most 100")])
def test_a_run_name_is_not_empty_short_enough_and_printable(tmp_path, course_data, tiny_model, monkeypatch, name, why):
    """'' would fall back on a timestamp without a word, a newline would split every line naming the run, and a
    name longer than a folder's name may be would end in an OSError: each is one line, nothing created."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MinbertError, match=rf"(^|: )--run_name .*: {re.escape(why)}"):
        mt.main(["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--run_name", name])
    with pytest.raises(MinbertError, match="--run_dir '': empty"):
        mt.main(["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--run_dir", ""])
    with pytest.raises(MinbertError, match=r"--run_dir x+\.\.\.: a name of 300 bytes, longer than a file system takes"):
        mt.main(["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--run_dir", "x" * 300])
    assert not (tmp_path / "runs").exists()
    assert check_run_name("x" * 100) == "x" * 100  # the limit itself is a name




def test_a_nested_run_name_is_a_folder_under_runs(tmp_path, course_data, tiny_model, monkeypatch):
    monkeypatch.chdir(tmp_path)
    classifier.main(["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--datasets", "sst",
                     "--epochs", "1", "--run_name", "exp/a"])
    assert (tmp_path / "runs" / "exp" / "a" / "last-linear-layer-sst.pt").is_file()


# ----------------------------------------------------------------------------- outputs and inputs


# ----------------------------------------------------------------------------- publishing keeps the user's files


def _part1_default_paths(data, model, *extra):
    return overridden(["--pretrained", str(model), "--data_dir", str(data), "--epochs", "1", "--batch_size", "8",
                       "--datasets", "sst", "--fine-tune-mode", "full-model", "--amp", "none"], extra)


def test_a_second_run_keeps_the_first_runs_files(tmp_path, course_data, tiny_model, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    classifier.main(_part1_default_paths(course_data, tiny_model, "--run_name", "first", "--lr", "1e-3"))
    first = {p.name: p.read_bytes() for p in (tmp_path / "runs" / "first").iterdir() if p.is_file()}
    assert {"full-model-sst.pt", "full-model-sst-dev-out.csv", "full-model-sst-log.jsonl"} <= set(first)
    published = (tmp_path / "predictions" / "full-model-sst-dev-out.csv").read_bytes()
    assert published == first["full-model-sst-dev-out.csv"]
    capsys.readouterr()
    classifier.main(_part1_default_paths(course_data, tiny_model, "--lr", "1e-6", "--seed", "5"))  # a default name
    out = capsys.readouterr().out
    second = [d for d in (tmp_path / "runs").iterdir() if d.is_dir() and d.name != "first"]
    assert len(second) == 1 and second[0].name.startswith("classifier-")
    assert {p.name: p.read_bytes() for p in (tmp_path / "runs" / "first").iterdir() if p.is_file()} == first  # untouched
    assert (tmp_path / "predictions" / "full-model-sst-dev-out.csv").read_bytes() == \
        (second[0] / "full-model-sst-dev-out.csv").read_bytes()
    # fp32 and these two learning rates give differing predictions, so the published file was replaced
    assert (second[0] / "full-model-sst-dev-out.csv").read_bytes() != published
    assert "replacing those of run first (still in runs/first)" in out
    sources = json.loads((tmp_path / "predictions" / ".sources.json").read_text())
    assert sources["full-model-sst-dev-out.csv"]["run"] == second[0].name
    # the same run name again is refused, in one line, before anything is written
    with pytest.raises(MinbertError, match=r"--run_name first \(runs/first\): already holds a run"):
        classifier.main(_part1_default_paths(course_data, tiny_model, "--run_name", "first"))
    assert {p.name: p.read_bytes() for p in (tmp_path / "runs" / "first").iterdir() if p.is_file()} == first


def test_multitask_runs_get_their_own_folders(tmp_path, course_data, tiny_model, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    common = ["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--epochs", "1", "--batch_size", "8",
              "--fine-tune-mode", "full-model"]
    mt.main(common + ["--run_name", "a", "--lr", "1e-3"])
    a_files = {p.name: p.read_bytes() for p in (tmp_path / "runs" / "a").iterdir() if p.is_file()}
    assert {"multitask.pt", "multitask-log.jsonl", "sst-dev-output.csv", "para-test-output.csv"} <= set(a_files)
    mt.main(common + ["--run_name", "b", "--lr", "5e-2", "--seed", "3"])
    out = capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in (tmp_path / "runs" / "a").iterdir() if p.is_file()} == a_files
    for name in ("sst-dev-output.csv", "sts-test-output.csv"):
        assert (tmp_path / "predictions" / name).read_bytes() == (tmp_path / "runs" / "b" / name).read_bytes()
    assert "replacing those of run a (still in runs/a)" in out
    rows = (tmp_path / "predictions" / "multitask-results.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows] == ["run", "a", "b"]  # the results table only grows


def test_resume_without_a_name_takes_the_newest_run(tmp_path, course_data, tiny_model, monkeypatch, capsys):
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")
    with pytest.raises(MinbertError, match="--resume: no classifier run to resume in runs/"):
        classifier.main(_part1_default_paths(course_data, tiny_model, "--resume"))
    monkeypatch.chdir(tmp_path)
    restore = interrupt_second_epoch(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        classifier.main(_part1_default_paths(course_data, tiny_model, "--run_name", "r1", "--epochs", "2"))
    restore()
    capsys.readouterr()
    classifier.main(_part1_default_paths(course_data, tiny_model, "--resume", "--epochs", "2"))
    assert "resumed full-model-sst from runs/r1/full-model-sst-last.pt after epoch 0" in capsys.readouterr().out


def test_restarting_a_run_folder_without_resume_is_refused(tmp_path, course_data, tiny_model, monkeypatch):
    """The earlier --checkpoint spelling names a run folder too: a new run there would overwrite its best
    checkpoint and append to its log."""
    restore = interrupt_second_epoch(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        mt.main(part2_args(tmp_path, course_data, tiny_model))
    restore()
    before = (tmp_path / "ck" / "mt.pt").read_bytes()
    with pytest.raises(MinbertError, match=r"--run_dir .*ck: already holds a run \(mt-log.jsonl\); choose another, "
                                           r"or add --resume"):
        mt.main(part2_args(tmp_path, course_data, tiny_model))
    assert (tmp_path / "ck" / "mt.pt").read_bytes() == before


def test_a_run_is_one_row_of_the_results_table_whatever_was_interrupted(tmp_path, course_data, tiny_model,
                                                                        monkeypatch):
    """Ctrl-C after the row was written but before the run ended, then the hinted --resume; then --resume of
    the finished run: the results table still holds the run once."""
    from minbert.training import fit as fit_module
    real = fit_module.publish

    def ctrl_c(*a, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(fit_module, "publish", ctrl_c)
    args = part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "2")
    with pytest.raises(KeyboardInterrupt):
        mt.main(args)
    table = tmp_path / "pred" / "results.csv"
    assert [r.split(",")[0] for r in table.read_text().splitlines()] == ["run", "ck"]
    monkeypatch.setattr(fit_module, "publish", real)
    mt.main(args + ["--resume"])
    mt.main(args + ["--resume"])
    assert [r.split(",")[0] for r in table.read_text().splitlines()] == ["run", "ck"]
    assert (tmp_path / "pred" / "sst-dev-output.csv").read_bytes() == (tmp_path / "ck" / "sst-dev-output.csv").read_bytes()


def test_a_finished_run_resumes_in_a_moved_project(tmp_path, course_data, tiny_model, monkeypatch, capsys):
    """The project moved (or its run folder copied into another copy) after the run finished: the same command
    with --resume and the default --results resumes it (the recorded table is the old project's), saying where
    its row is and adding none; a --results typed for another table is still refused."""
    common = ["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--epochs", "1", "--batch_size", "8",
              "--fine-tune-mode", "full-model", "--lr", "1e-3", "--steps_per_epoch", "2", "--run_name", "a"]
    (tmp_path / "old").mkdir()
    monkeypatch.chdir(tmp_path / "old")
    mt.main(common)
    shutil.move(tmp_path / "old", tmp_path / "new")
    monkeypatch.chdir(tmp_path / "new")
    rows = (tmp_path / "new" / "predictions" / "multitask-results.csv").read_text()
    files = lambda: {k: v for k, v in snapshot(tmp_path / "new" / "runs" / "a").items() if k != ".minbert-run"}
    before = files()  # (the folder's mark notes each process that holds it)
    capsys.readouterr()
    mt.main(common + ["--resume"])
    out = capsys.readouterr().out
    assert "not scored again" in out
    assert f"its results row went to {tmp_path / 'old' / 'predictions' / 'multitask-results.csv'} when it " \
           f"finished; none is added to {tmp_path / 'new' / 'predictions' / 'multitask-results.csv'}" in out
    assert (tmp_path / "new" / "predictions" / "multitask-results.csv").read_text() == rows
    assert files() == before
    with pytest.raises(MinbertError, match="the run had finished and its row is in .*old.*; --resume scores nothing "
                                           "again, so it has no row for --results .*other.csv: leave --results out"):
        mt.main(common + ["--resume", "--results", str(tmp_path / "other.csv")])


@pytest.mark.parametrize("where", ["inside", "predictions", "project"])
def test_a_run_folder_never_nests_in_another_or_in_predictions(tmp_path, course_data, tiny_model, monkeypatch, where):
    monkeypatch.chdir(tmp_path)
    mt.main(_quick(tmp_path, course_data, tiny_model))  # a run in ck/
    before = snapshot(tmp_path / "ck")
    folder, match = {"inside": (tmp_path / "ck" / "sub", "inside .*ck, the folder of another run"),
                     "predictions": (tmp_path / "predictions", "a folder of published predictions"),
                     "project": (ROOT / "minbert" / "my-run", "among the project's own files")}[where]
    with pytest.raises(MinbertError, match=rf"--run_dir {folder}: {match}"):
        mt.main(_quick(tmp_path / "other", course_data, tiny_model, "--run_dir", str(folder)))
    assert not folder.exists() and snapshot(tmp_path / "ck") == before
    if where == "inside":
        with pytest.raises(MinbertError, match=rf"--out {folder}: inside .*ck, the folder of another run"):
            pretrain.main(["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--out", str(folder),
                           "--epochs", "1"])
        assert not folder.exists()


def test_eval_only_writes_into_a_run_folder_of_its_own(tmp_path, course_data, tiny_model, monkeypatch):
    """--eval_only on other data leaves the checkpoint's run folder as it was: its files go into runs/eval-*
    (or --run_name), and are published from there."""
    monkeypatch.chdir(tmp_path)
    mt.main(_quick(tmp_path, course_data, tiny_model))
    before = snapshot(tmp_path / "ck")
    other = tmp_path / "data2"
    shutil.copytree(course_data, other)
    args = [a for a in _quick(tmp_path, other, tiny_model) if a != "--checkpoint"]
    args = [a for a in args if not a.endswith("mt.pt")] + ["--eval_only", str(tmp_path / "ck" / "mt.pt")]
    mt.main(args + ["--run_name", "rescored"])
    assert snapshot(tmp_path / "ck") == before
    assert (tmp_path / "runs" / "rescored" / "sst-dev-output.csv").read_bytes() == \
        (tmp_path / "pred" / "sst-dev-output.csv").read_bytes()
    mt.main(args)  # a default name
    assert len([d for d in (tmp_path / "runs").iterdir() if d.name.startswith("eval-")]) == 1
    with pytest.raises(MinbertError, match=r"--run_dir .*ck: the run folder of a multitask_classifier.py run; a "
                                           r"multitask_classifier.py --eval_only run writes into a folder of its own"):
        mt.main(args + ["--run_dir", str(tmp_path / "ck")])
    assert snapshot(tmp_path / "ck") == before


def test_a_run_stopped_before_writing_removes_the_folders_it_made_and_no_other(tmp_path, course_data, tiny_model,
                                                                               monkeypatch):
    """runs/ there already (empty), --run_name a/b: a run stopped before its first epoch ends leaves runs/ as it
    was, without a/b or a/, which it made."""
    from minbert.training.trainer import Trainer
    monkeypatch.chdir(tmp_path)
    (tmp_path / "runs").mkdir()

    def stopped(self, *a, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(Trainer, "run_epoch", stopped)
    with pytest.raises(KeyboardInterrupt):
        mt.main(["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--run_name", "a/b",
                 "--no_tensorboard"])
    assert (tmp_path / "runs").is_dir() and list((tmp_path / "runs").iterdir()) == []


def test_resume_without_a_name_takes_the_newest_run_of_the_pipeline(tmp_path):
    """Two runs of the model under runs/: --resume alone continues the one written last, whichever that is."""
    from minbert.runs.folders import open_run
    old, new = tmp_path / "runs" / "mt-old", tmp_path / "runs" / "mt-new"
    for folder, when in ((old, 1_000_000), (new, 2_000_000)):
        folder.mkdir(parents=True)
        (folder / "mt-log.jsonl").write_text("")
        os.utime(folder, (when, when))
    with open_run("multitask", ["mt"], resume=True, root=tmp_path / "runs") as run:
        assert run.folder == new
    os.utime(new, (2_000_000, 2_000_000))  # (opening it wrote its mark, which made it the newest anyway)
    os.utime(old, (3_000_000, 3_000_000))
    with open_run("multitask", ["mt"], resume=True, root=tmp_path / "runs") as run:
        assert run.folder == old


@pytest.mark.parametrize("name,refused", [("a b", False), ("a~b", False), ("a\x1fb", True), ("a\x7fb", True),
                                          ("a\tb", True), ("exp/run-1", False), ("exp/../x", True), ("x ", True)])
def test_a_run_names_characters_from_both_sides_of_each_rule(name, refused):
    """A space and '~' (32 and 126) are a name's, the control characters around them (31, 127, a tab) are not; a
    nested name stays under runs/ unless it climbs out; spaces around a name are refused."""
    if refused:
        with pytest.raises(MinbertError, match=r"^--run_name "):
            check_run_name(name)
    else:
        assert check_run_name(name) == name


def test_a_folder_given_for_a_checkpoint_yields_its_one_best_checkpoint_and_says_what_else_it_is(tmp_path):
    """best_checkpoint: the one NAME.pt beside its NAME-last.pt; two best checkpoints, none, or another pipeline's
    folder are each one line."""
    from minbert.runs.folders import best_checkpoint
    from tests.course import mark_run
    run = tmp_path / "run"
    run.mkdir()
    mark_run(run, "multitask", {})
    (run / "mt.pt").write_bytes(b"")
    (run / "mt-last.pt").write_bytes(b"")
    assert best_checkpoint(run, "multitask", "--eval_only") == run / "mt.pt"
    with pytest.raises(MinbertError, match=r"^--checkpoint .*run: the folder of a multitask_classifier.py run; "
                                           r"--checkpoint takes a classifier.py run's checkpoint or folder"):
        best_checkpoint(run, "classifier", "--checkpoint")
    (run / "other.pt").write_bytes(b"")
    with pytest.raises(MinbertError, match=r"a folder with 2 checkpoints \(mt.pt, other.pt\); give the one to use"):
        best_checkpoint(run, "multitask", "--eval_only")
    (run / "mt.pt").unlink()
    (run / "other.pt").unlink()
    with pytest.raises(MinbertError, match=r"a folder with no best checkpoint \(NAME.pt\) in it"):
        best_checkpoint(run, "multitask", "--eval_only")


def test_what_a_folder_is_read_from_its_mark_or_its_log(tmp_path, monkeypatch):
    """A folder is a run's when marked or (an earlier minbert's) holding a log; its run folder is the nearest
    marked one above a path; the flags it records are its first model's in name order; a new run's name is
    its prefix and the time, and two runs of one second get -2."""
    from minbert.project_paths import run_folder_of
    from minbert.runs.folders import is_run_folder, new_run_name, open_run, recorded_flags
    from tests.course import mark_run
    plain_folder, old, marked = tmp_path / "plain", tmp_path / "old", tmp_path / "marked"
    for f in (plain_folder, old, marked):
        f.mkdir()
    (old / "mt-log.jsonl").write_text("")
    mark_run(marked, "multitask", {"lr": 0.1}, stem="b")
    assert [is_run_folder(f) for f in (plain_folder, old, marked)] == [False, True, True]
    (marked / "sub" / "deeper").mkdir(parents=True)
    assert run_folder_of(marked / "sub" / "deeper") == marked and run_folder_of(plain_folder) is None
    assert recorded_flags(marked)["lr"] == 0.1 and recorded_flags(plain_folder) is None
    mark = json.loads((marked / ".minbert-run").read_text())
    mark["flags"]["a"] = {"lr": 0.2}  # a first model by name
    (marked / ".minbert-run").write_text(json.dumps(mark))
    assert recorded_flags(marked)["lr"] == 0.2
    assert re.fullmatch(r"mt-\d{8}-\d{6}", new_run_name("mt"))
    import minbert.runs.folders as folders
    monkeypatch.setattr(folders, "new_run_name", lambda prefix: f"{prefix}-20260101-000000")  # one second
    with open_run("multitask", ["mt"], root=tmp_path / "runs") as first:
        (first.folder / "mt-log.jsonl").write_text("")
    with open_run("multitask", ["mt"], root=tmp_path / "runs") as second:
        assert (first.folder.name, second.folder.name) == ("multitask-20260101-000000",
                                                           "multitask-20260101-000000-2")


def test_a_finished_runs_folder_takes_no_run_of_another_mode(tmp_path, course_data, tiny_model, monkeypatch):
    """A Part 1 run of last-linear-layer, then one of full-model under the same --run_name: the second writes other
    file names, but the folder is the first run's, so it is refused (with no --resume advice: it is not this run)
    and the first run's files stay as they were."""
    monkeypatch.chdir(tmp_path)
    common = ["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--epochs", "1", "--batch_size", "16",
              "--datasets", "sst", "--run_name", "one", "--predictions_dir", str(tmp_path / "pred")]
    classifier.main(common)
    before = snapshot(tmp_path / "runs" / "one")
    with pytest.raises(MinbertError, match=r"^--run_name one \(.*one\): already holds a run "
                                           r"\(last-linear-layer-sst.*\); choose another$"):
        classifier.main(common + ["--fine-tune-mode", "full-model"])
    assert snapshot(tmp_path / "runs" / "one") == before
