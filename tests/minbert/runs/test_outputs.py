"""runs/outputs.py: no output names an input, another output or a file in another run's folder; a folder where a
file goes fails before training; a file no run wrote is kept as a dated backup before it is replaced."""
from pathlib import Path

import pytest

import ensemble
import multitask_classifier as mt
import report
from minbert.runs import outputs
from tests.course import ROOT, part1_args, part2_args, snapshot, two_runs_published
from tests.processes import one_line_error, run_main
from utils import MinbertError


def _quick(tmp_path, data, model, *extra):
    """A two-step multitask run (the shared argument builder, shortened)."""
    return part2_args(tmp_path, data, model, "--epochs", "1", "--steps_per_epoch", "2", *extra)


def test_an_output_folder_that_is_a_file_fails_before_training(tmp_path, course_data, tiny_model):
    (tmp_path / "pred").write_text("I am a file")
    out = run_main("classifier.py", *part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst"), cwd=tmp_path)
    one_line_error(out, r"pred: is a file, but the run writes a folder there")
    assert not (tmp_path / "ck").exists()  # nothing trained, nothing saved
    (tmp_path / "blocker").write_text("a file")
    out = run_main("multitask_classifier.py", "--pretrained", str(tiny_model), "--data_dir", str(course_data),
                   "--sst_dev_out", str(tmp_path / "blocker" / "sst-dev.csv"), cwd=tmp_path)
    one_line_error(out, r"blocker: is a file, but the run writes .*sst-dev.csv inside it")
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("where, match", [
    # its checkpoint's path (published into after training: a traceback), a folder inside its own (the run's
    # folder itself is taken: a sweep's trial keeps its files there)
    ("ck/last-linear-layer-sst.pt", r"inside this run's folder .*ck, which holds its files already"),
    ("ck/pred", r"inside this run's folder .*ck, which holds its files already"),
    # a folder of published files that would hold the run's folder
    (".", r"holds this run's folder .*ck; a run folder never lies in a folder of published files"),
])
def test_a_predictions_folder_and_the_runs_folder_lie_apart(tmp_path, course_data, tiny_model, monkeypatch, where,
                                                              match):
    """Refused before training (publishing into the checkpoint's path had failed after it, with a traceback)."""
    import classifier
    from minbert.pipelines import classifier as pipeline
    monkeypatch.setattr(pipeline, "fit", lambda *a, **k: pytest.fail("a run trained with its outputs misplaced"))
    with pytest.raises(MinbertError, match=rf"^--predictions_dir .*: {match}"):
        classifier.main(part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst", "--epochs", "1",
                                   "--predictions_dir", str(tmp_path / where)))
    assert not (tmp_path / "ck").exists()


def test_a_folder_of_outputs_is_never_the_course_datas(tmp_path, course_data, tiny_model, monkeypatch):
    """--predictions_dir (or ensemble.py --out) at a folder of the course CSVs outside the project: refused before
    training (the files had gone in among the data)."""
    import classifier
    before = snapshot(course_data)
    with pytest.raises(MinbertError, match=r"^--predictions_dir .*data: holds the course's data files \(ids-"):
        classifier.main(part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst", "--epochs", "1",
                                   "--predictions_dir", str(course_data)))
    assert snapshot(course_data) == before


def test_no_output_may_name_an_input(tmp_path, course_data, tiny_model):
    data = snapshot(course_data)
    with pytest.raises(MinbertError, match=r"--sst_dev_out .*ids-sst-dev.csv: is the --sst_dev data file, which this "
                                           r"run reads"):
        mt.main(_quick(tmp_path, course_data, tiny_model, "--sst_dev_out", str(course_data / "ids-sst-dev.csv")))
    with pytest.raises(MinbertError, match=r"--results .*sts-dev.csv: not a results table"):
        mt.main(_quick(tmp_path, course_data, tiny_model, "--results", str(course_data / "sts-dev.csv")))
    assert snapshot(course_data) == data
    # --eval_only: the checkpoint it reads is an input too
    mt.main(_quick(tmp_path, course_data, tiny_model))
    ckpt = tmp_path / "ck" / "mt.pt"
    saved = ckpt.read_bytes()
    with pytest.raises(MinbertError, match=r"--sst_test_out .*mt.pt: is the --eval_only checkpoint"):
        mt.main(_quick(tmp_path, course_data, tiny_model, "--eval_only", str(ckpt), "--sst_test_out", str(ckpt)))
    assert ckpt.read_bytes() == saved


def test_two_outputs_naming_one_file_are_refused(tmp_path, course_data, tiny_model):
    same = str(tmp_path / "out.csv")
    with pytest.raises(MinbertError, match=r"--para_dev_out .*out.csv: --sst_dev_out .*out.csv names the same file"):
        mt.main(_quick(tmp_path, course_data, tiny_model, "--sst_dev_out", same, "--para_dev_out", same))
    # one inside the other's file, in either order of the flags (publishing had failed after training, with a
    # traceback and a folder where a file goes); side by side, both are taken
    for first, second in (("--sst_dev_out", "--sst_test_out"), ("--sst_test_out", "--sst_dev_out")):
        args = {first: str(tmp_path / "q" / "dev.csv"), second: str(tmp_path / "q" / "dev.csv" / "test.csv")}
        with pytest.raises(MinbertError, match=rf"^{second} .*dev.csv/test.csv: inside the file {first} .*q/dev.csv "
                                               r"writes; name another path for one of them$"):
            mt.main(_quick(tmp_path, course_data, tiny_model, *[x for kv in args.items() for x in kv]))
    assert not (tmp_path / "q").exists()
    mt.main(_quick(tmp_path, course_data, tiny_model, "--sst_dev_out", str(tmp_path / "q" / "dev.csv"),
                   "--sst_test_out", str(tmp_path / "q" / "test.csv")))
    assert (tmp_path / "q" / "dev.csv").is_file() and (tmp_path / "q" / "test.csv").is_file()


def test_an_output_inside_another_runs_folder_is_refused(tmp_path, course_data, tiny_model):
    mt.main(_quick(tmp_path / "a", course_data, tiny_model))
    other = tmp_path / "a" / "ck"
    before = snapshot(other)
    with pytest.raises(MinbertError, match=r"--sst_dev_out .*: inside .*a/ck, the folder of another run"):
        mt.main(_quick(tmp_path / "b", course_data, tiny_model, "--sst_dev_out", str(other / "sst-dev-output.csv")))
    with pytest.raises(MinbertError, match=r"--out .*: inside .*a/ck, the folder of another run"):
        ensemble.main([str(other / "mt.pt"), str(tmp_path / "a" / "pred"), "--data_dir", str(course_data),
                       "--run_dir", str(tmp_path / "ens"), "--out", str(other)])
    mt.main(_quick(tmp_path / "b", course_data, tiny_model))
    with pytest.raises(MinbertError, match=r"--out .*a/ck: inside .*a/ck, the folder of a run this report is not about"):
        report.main([str(tmp_path / "b" / "ck"), "--out", str(other)])
    assert snapshot(other) == before
    report.main([str(tmp_path / "a" / "ck"), "--out", str(other)])  # into the folder of the run it is about: taken
    assert (other / "report.md").is_file()


def test_a_file_no_run_wrote_is_refused_or_kept_with_backup(tmp_path, course_data, tiny_model, capsys):
    """An output that would replace a file no run wrote stops the run before training, in one line offering
    --backup; with --backup the file is kept as a dated backup and a line says so."""
    pred = tmp_path / "pred"
    pred.mkdir()
    (pred / "sst-dev-output.csv").write_text("the user's own predictions\n")
    with pytest.raises(MinbertError, match=r"--sst_dev_out .*sst-dev-output.csv: holds a file this project did not "
                                           r"write .* add --backup to keep it as sst-dev-output.csv.DATE.bak"):
        mt.main(_quick(tmp_path, course_data, tiny_model))
    assert sorted(p.name for p in pred.iterdir()) == ["sst-dev-output.csv"] and not (tmp_path / "ck").exists()
    mt.main(_quick(tmp_path, course_data, tiny_model, "--backup"))
    out = capsys.readouterr().out
    backups = list(pred.glob("sst-dev-output.csv.*.bak"))
    assert len(backups) == 1 and backups[0].read_text() == "the user's own predictions\n"
    line = [l for l in out.splitlines() if l.startswith("kept files that no run wrote")]
    assert len(line) == 1 and f"{pred / 'sst-dev-output.csv'} -> {backups[0].name}" in line[0]
    # what a run wrote is replaced by the next run; a published file the user edited afterwards is theirs now
    again = [x for t in ("sst", "para", "sts") for s in ("dev", "test") for x in (f"--{t}_{s}_out", str(pred / f"{t}-{s}-output.csv"))]
    mt.main(_quick(tmp_path / "again", course_data, tiny_model, *again))
    (pred / "sts-dev-output.csv").write_text("edited by hand\n")
    with pytest.raises(MinbertError, match=r"--sts_dev_out .*sts-dev-output.csv: was changed since run ck wrote it, and "
                                           r"the changes would be lost: move it or name another path, or add --backup"):
        mt.main(_quick(tmp_path / "third", course_data, tiny_model, *again))
    assert (pred / "sts-dev-output.csv").read_text() == "edited by hand\n"
    mt.main(_quick(tmp_path / "fourth", course_data, tiny_model, *again, "--backup"))
    edited = list(pred.glob("sts-dev-output.csv.*.bak"))
    assert len(edited) == 1 and edited[0].read_text() == "edited by hand\n"
    assert len(list(pred.glob("*.bak"))) == 2  # what the runs wrote was replaced, not backed up


def test_no_output_replaces_a_file_of_the_project(tmp_path, course_data, tiny_model, monkeypatch):
    """The project's own files (code, course data) are never replaced, --backup or not; a new file is fine."""
    monkeypatch.chdir(ROOT)
    before = (ROOT / "bert.py").read_bytes()
    for extra in ([], ["--backup"]):
        with pytest.raises(MinbertError, match=r"--sts_test_out bert.py: is one of the project's own files"):
            mt.main(_quick(tmp_path, course_data, tiny_model, "--sts_test_out", "bert.py", *extra))
    assert (ROOT / "bert.py").read_bytes() == before and not list(ROOT.glob("bert.py.*.bak"))
    assert not (ROOT / ".sources.json").exists()


def test_ensemble_out_into_a_users_folder_keeps_their_file(tmp_path, course_data, tiny_model, capsys):
    mt.main(_quick(tmp_path, course_data, tiny_model))
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "para-test-output.csv").write_text("mine\n")
    argv = [str(tmp_path / "ck" / "mt.pt"), str(tmp_path / "pred"), "--data_dir", str(course_data), "--out", str(mine)]
    with pytest.raises(MinbertError, match="--out .*para-test-output.csv: holds a file this project did not write"):
        ensemble.main(argv + ["--run_dir", str(tmp_path / "ens")])
    assert [p.name for p in mine.iterdir()] == ["para-test-output.csv"]
    ensemble.main(argv + ["--run_dir", str(tmp_path / "ens2"), "--backup"])
    assert [p.read_text() for p in mine.glob("para-test-output.csv.*.bak")] == ["mine\n"]
    assert "kept files that no run wrote" in capsys.readouterr().out


def test_report_out_keeps_a_users_file(tmp_path, course_data, tiny_model, capsys):
    mt.main(_quick(tmp_path, course_data, tiny_model))
    out = tmp_path / "notes"
    out.mkdir()
    (out / "report.md").write_text("my notes\n")
    with pytest.raises(MinbertError, match="--out .*report.md: holds a file this project did not write"):
        report.main([str(tmp_path / "ck"), "--out", str(out)])
    assert [p.name for p in out.iterdir()] == ["report.md"]
    report.main([str(tmp_path / "ck"), "--out", str(out), "--backup"])
    assert [p.read_text() for p in out.glob("report.md.*.bak")] == ["my notes\n"]
    report.main([str(tmp_path / "ck"), "--out", str(out)])  # its own report is replaced, not backed up again
    assert len(list(out.glob("*.bak"))) == 1


def test_no_output_goes_among_the_projects_code_docs_or_data(tmp_path, course_data, tiny_model, monkeypatch):
    """Even a new file: ensemble.py --out docs would scatter prediction files among the documentation."""
    monkeypatch.chdir(ROOT)
    with pytest.raises(MinbertError, match=r"--sst_dev_out docs/new.csv: among the project's code, docs or data"):
        mt.main(_quick(tmp_path, course_data, tiny_model, "--sst_dev_out", "docs/new.csv"))
    with pytest.raises(MinbertError, match=r"--predictions_dir minbert: among the project's code, docs or data"):
        import classifier
        classifier.main(part1_args(tmp_path, course_data, tiny_model, "--predictions_dir", "minbert"))
    assert not (ROOT / "docs" / "new.csv").exists() and not list((ROOT / "minbert").glob("*.csv"))


def test_a_course_data_file_is_never_an_output_backup_or_not(tmp_path, course_data, tiny_model):
    """Part 2 does not read CFIMDB, yet its dev file is course data: refused with --backup too, nothing renamed;
    a sonnet file of Build GPT-2 likewise."""
    data = snapshot(course_data)
    for extra in ([], ["--backup"]):
        with pytest.raises(MinbertError, match=r"--para_test_out .*ids-cfimdb-dev.csv: is named like a course data "
                                               r"file \(ids-cfimdb-dev.csv\), which no command writes, --backup or not"):
            mt.main(_quick(tmp_path, course_data, tiny_model, "--para_test_out", str(course_data / "ids-cfimdb-dev.csv"),
                           *extra))
    (course_data / "sonnets.txt").write_text("From fairest creatures we desire increase,\n")
    with pytest.raises(MinbertError, match=r"--out .*sonnets.txt: is named like a course data file"):
        outputs.check_outputs(files=[("--out", course_data / "sonnets.txt")], backup=True)
    assert snapshot(course_data) == {**data, "sonnets.txt": snapshot(course_data)["sonnets.txt"]}
    (tmp_path / "x").mkdir()  # a new file of that name, on the first run already (the next would read it as data)
    with pytest.raises(MinbertError, match=r"--para_test_out .*x/quora-dev.csv: is named like a course data file"):
        mt.main(_quick(tmp_path, course_data, tiny_model, "--para_test_out", str(tmp_path / "x" / "quora-dev.csv")))
    assert not (tmp_path / "ck").exists() and not list((tmp_path / "x").iterdir())


def test_special_files_and_files_that_cannot_be_replaced_stop_the_run_before_training(tmp_path, course_data,
                                                                                      tiny_model, unwritable_file):
    """A named pipe as --sst_dev_out, a link in predictions/, an immutable published file or results table: one
    line before anything trains (not a PermissionError after it), and each stays what it was."""
    import os
    pred = tmp_path / "pred"
    pred.mkdir()
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes on this system")
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(MinbertError, match=r"--sst_dev_out .*pipe: is a named pipe, not a regular file"):
        mt.main(_quick(tmp_path, course_data, tiny_model, "--sst_dev_out", str(tmp_path / "pipe")))
    os.symlink(tmp_path / "nowhere.csv", pred / "sts-dev-output.csv")
    with pytest.raises(MinbertError, match=r"--sts_dev_out .*sts-dev-output.csv: is a link to .*nowhere.csv \(which "
                                           r"does not exist\)"):
        mt.main(_quick(tmp_path, course_data, tiny_model))
    (pred / "sts-dev-output.csv").unlink()
    assert (tmp_path / "pipe").is_fifo() and not (tmp_path / "ck").exists()
    mt.main(_quick(tmp_path / "a", course_data, tiny_model, *_in(pred)))
    unwritable_file(pred / "sts-test-output.csv")
    with pytest.raises(MinbertError, match=r"--sts_test_out .*sts-test-output.csv: cannot be replaced"):
        mt.main(_quick(tmp_path / "b", course_data, tiny_model, *_in(pred)))
    assert not (tmp_path / "b" / "ck").exists()
    unwritable_file(pred / "results.csv")
    with pytest.raises(MinbertError, match=r"--results .*results.csv: cannot be appended to"):
        mt.main(_quick(tmp_path / "c", course_data, tiny_model, *_in(pred, outputs=False)))
    assert not (tmp_path / "c" / "ck").exists()


def _in(pred, outputs=True):
    """The flags putting a Part 2 run's six files (or only its results table) into `pred`."""
    flags = ["--results", str(pred / "results.csv")]
    if outputs:
        flags += [x for t in ("sst", "para", "sts") for s in ("dev", "test")
                  for x in (f"--{t}_{s}_out", str(pred / f"{t}-{s}-output.csv"))]
    return flags


def test_a_tool_never_replaces_a_runs_published_file(tmp_path):
    """A tool's --out or --json naming a prediction file a run published (a slip of the path) is one line and the
    file stays the run's; a tool's own earlier output is replaced as before."""
    from minbert.runs.publishing import write_output
    two_runs_published(tmp_path)
    published = tmp_path / "predictions" / "sst-dev-output.csv"
    before = published.read_bytes()
    with pytest.raises(MinbertError, match=r"--out .*sst-dev-output.csv: holds run a's sst-dev-output.csv, copied "
                                           r"from .*runs/a, which only a run's publishing replaces"):
        outputs.check_file(published, "--out")
    assert published.read_bytes() == before
    write_output(tmp_path / "predictions" / "timings.json", lambda fp: fp.write(b"{}"), "bench.py")
    outputs.check_file(tmp_path / "predictions" / "timings.json", "--json")


def test_a_table_gets_its_header_once_and_each_run_one_row(tmp_path):
    """append_once: a new or empty file gets the header first; a run already in the table (any row of it) is not
    added again; another run is."""
    import csv
    from minbert.runs.outputs import append_once
    table = tmp_path / "t.csv"
    table.write_text("")  # made empty (touched) before any run
    assert append_once(table, ["run", "mean"], {"run": "a", "mean": 1})
    assert append_once(table, ["run", "mean"], {"run": "b", "mean": 2})
    assert not append_once(table, ["run", "mean"], {"run": "a", "mean": 3})  # a's row is there, b's after it
    assert [dict(r) for r in csv.DictReader(table.open())] == [{"run": "a", "mean": "1"}, {"run": "b", "mean": "2"}]


def test_a_runs_own_folder_is_its_to_replace_in(tmp_path):
    """An output in the run's own folder replaces what is there (its files, or a stale one), with no --backup; the
    same file outside any run folder is protected by the rule."""
    from minbert.runs.outputs import check_outputs
    own = tmp_path / "runs" / "r"
    own.mkdir(parents=True)
    (own / ".minbert-run").write_text("{}\n")
    (own / "sst-dev-output.csv").write_text("someone's\n")
    check_outputs(files=[("--sst_dev_out", own / "sst-dev-output.csv")], own=own)
    (tmp_path / "mine.csv").write_text("someone's\n")
    with pytest.raises(MinbertError, match=r"--sst_dev_out .*mine.csv: holds a file this project did not write"):
        check_outputs(files=[("--sst_dev_out", tmp_path / "mine.csv")], own=own)


def test_a_results_table_saved_with_a_byte_order_mark_is_still_this_scripts(tmp_path):
    """Excel's "CSV UTF-8" puts a byte-order mark before the header: the table is taken (rows append to it); a
    table with another header, with or without the mark, is refused in one line."""
    from minbert.runs.outputs import check_table
    fields = ["run", "mean"]
    ours = tmp_path / "ours.csv"
    ours.write_bytes("\ufeffrun,mean\nr1,0.5\n".encode("utf-8"))
    check_table(ours, fields, "--results")
    other = tmp_path / "other.csv"
    other.write_bytes("\ufeffmy,own\n".encode("utf-8"))
    with pytest.raises(MinbertError, match=r"--results .*other.csv: not a results table of this script \(its first "
                                           r"line is 'my,own'\)"):
        check_table(other, fields, "--results")


def test_an_output_is_named_after_its_flag_only_where_the_flag_was_typed(tmp_path):
    """check_outputs with the flags typed: an output at its flag's default is named by its path alone and the flag
    is offered as the way to write elsewhere (a folder's flag with DIR, a file's with FILE); typed, the flag names
    it as before. check_table the same for --results."""
    import re
    from minbert.runs.outputs import check_outputs, check_table
    mine = tmp_path / "predictions" / "sst-dev-output.csv"
    mine.parent.mkdir()
    mine.write_text("the user's own\n")
    for flag, metavar in (("--sst_dev_out", "FILE"), ("--predictions_dir", "DIR")):
        dirs = [(flag, mine.parent)] if metavar == "DIR" else []
        with pytest.raises(MinbertError) as refused:
            check_outputs(dirs=dirs, files=[(flag, mine)], backup=False, typed={"seed"})
        assert str(refused.value) == (f"{mine}: holds a file this project did not write (or one changed since it did), "
                                      f"which would be lost: move it or write elsewhere with {flag} {metavar}, or add "
                                      "--backup to keep it as sst-dev-output.csv.DATE.bak")
        with pytest.raises(MinbertError, match=rf"^{flag} {re.escape(str(mine))}: holds a file this project did not "
                                               r"write .*: move it or name another path, or add --backup"):
            check_outputs(dirs=dirs, files=[(flag, mine)], backup=False, typed={flag.lstrip("-")})
    (tmp_path / "blocker").write_text("a file\n")
    with pytest.raises(MinbertError, match=r"blocker: is a file, but the run writes a folder there; move it or write "
                                           r"elsewhere with --predictions_dir DIR$"):
        check_outputs(dirs=[("--predictions_dir", tmp_path / "blocker")], typed=set())
    table = tmp_path / "predictions" / "multitask-results.csv"
    table.write_text("my,own\n")
    with pytest.raises(MinbertError, match=rf"^{re.escape(str(table))}: not a results table of this script .*: move "
                                           r"it or write elsewhere with --results FILE$"):
        check_table(table, ["run", "mean"], "--results", typed=False)
    with pytest.raises(MinbertError, match=rf"^--results {re.escape(str(table))}: not a results table .*: move it or "
                                           r"name another path$"):
        check_table(table, ["run", "mean"], "--results")


def test_part2_at_its_default_paths_names_no_flag_it_was_not_given(tmp_path, course_data, tiny_model, monkeypatch):
    """multitask_classifier.py with its leaderboard files and results table at their defaults (predictions/): a
    file of the user's there is named by its path, with --sst_dev_out FILE and --backup offered; typed, the flag
    names it; either way before anything trains."""
    monkeypatch.chdir(tmp_path)
    argv = ["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--epochs", "1", "--steps_per_epoch",
            "2", "--run_dir", str(tmp_path / "ck")]
    Path("predictions").mkdir()
    Path("predictions/sst-dev-output.csv").write_text("the user's own\n")
    with pytest.raises(MinbertError) as refused:
        mt.main(argv)
    assert str(refused.value) == ("predictions/sst-dev-output.csv: holds a file this project did not write (or one "
                                  "changed since it did), which would be lost: move it or write elsewhere with "
                                  "--sst_dev_out FILE, or add --backup to keep it as sst-dev-output.csv.DATE.bak")
    with pytest.raises(MinbertError, match=r"^--sst_dev_out predictions/sst-dev-output.csv: holds a file .*: move it "
                                           r"or name another path, or add --backup"):
        mt.main(argv + ["--sst_dev_out", "predictions/sst-dev-output.csv"])
    Path("predictions/multitask-results.csv").write_text("my,own\n")
    with pytest.raises(MinbertError, match=r"^predictions/multitask-results.csv: not a results table of this script "
                                           r".*: move it or write elsewhere with --results FILE$"):
        mt.main(argv)
    assert not (tmp_path / "ck").exists() and Path("predictions/sst-dev-output.csv").read_text() == "the user's own\n"
