"""tools/collect_logs.py: one CSV row per trained model of the run folders given: its best epoch, dev score and
metrics, every epoch's dev score, the training minutes and the last loss terms."""
import csv
import json
import os

import pytest

from tools import collect_logs
from utils import MinbertError


def test_one_row_per_model_with_its_best_epoch(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    rows = [{"run": "r", "pipeline": "multitask", "model": "multitask", "epoch": e, "dev_score": s,
             "dev": {"sst": s, "quora": s}, "seconds": 60.0, "loss_terms": {"rdrop": 0.1 * e}}
            for e, s in enumerate([0.5, 0.7, 0.6])]
    (run / "multitask-log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    table = list(collect_logs.rows(run))
    assert len(table) == 1
    row = table[0]
    assert (row["best_epoch"], row["dev_score"], row["epochs"], row["train_minutes"]) == (1, "0.7000", 3, "3.0")
    assert row["dev_scores"] == "0.5000 0.7000 0.6000" and row["loss_terms"] == "rdrop=0.2"
    out = tmp_path / "rows.csv"
    collect_logs.main([str(run), "--out", str(out)])
    assert list(csv.DictReader(out.open()))[0]["dev"] == "sst=0.7000 quora=0.7000"


def test_out_replaces_only_its_own_table(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "multitask-log.jsonl").write_text(json.dumps({"run": "r", "pipeline": "multitask", "model": "multitask",
                                                         "epoch": 0, "dev_score": 0.5, "dev": {"sst": 0.5}, "seconds": 1.0,
                                                         "loss_terms": {}}) + "\n")
    mine = tmp_path / "mydata.csv"
    mine.write_text("the user's table\n")
    with pytest.raises(MinbertError, match=r"--out .*mydata.csv: holds a file this project did not write"):
        collect_logs.main([str(run), "--out", str(mine)])
    assert mine.read_text() == "the user's table\n"
    out = tmp_path / "rows.csv"
    collect_logs.main([str(run), "--out", str(out)])
    collect_logs.main([str(run), "--out", str(out)])  # its own table, unchanged since: replaced
    assert len(list(csv.DictReader(out.open()))) == 1
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes on this system")
    os.mkfifo(tmp_path / "pipe")
    os.symlink(tmp_path / "nowhere.csv", tmp_path / "link.csv")
    for special, what in ((tmp_path / "pipe", "is a named pipe"), (tmp_path / "link.csv", "is a link to")):
        with pytest.raises(MinbertError, match=rf"--out .*: {what}"):
            collect_logs.main([str(run), "--out", str(special)])
    assert (tmp_path / "pipe").is_fifo() and (tmp_path / "link.csv").is_symlink()


def test_ctrl_c_while_writing_out_leaves_nothing_the_next_run_refuses(tmp_path, monkeypatch):
    """The table and its record go in together: interrupted at its first rename, the folder is as it was, and the
    same command then writes the table (before, the table was there unrecorded, and refused as the user's)."""
    run = tmp_path / "r"
    run.mkdir()
    (run / "multitask-log.jsonl").write_text(json.dumps({"run": "r", "pipeline": "multitask", "model": "multitask",
                                                         "epoch": 0, "dev_score": 0.5, "dev": {"sst": 0.5}, "seconds": 1.0,
                                                         "loss_terms": {}}) + "\n")
    out = tmp_path / "tables" / "rows.csv"
    out.parent.mkdir()
    real = os.replace

    def interrupted(*a):
        raise KeyboardInterrupt
    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        collect_logs.main([str(run), "--out", str(out)])
    monkeypatch.setattr(os, "replace", real)
    assert list(out.parent.iterdir()) == []
    collect_logs.main([str(run), "--out", str(out)])
    assert len(list(csv.DictReader(out.open()))) == 1


def test_every_folder_is_checked_before_any_row_and_the_results_table_is_named(tmp_path, capsys):
    """A missing folder, a file, a folder no run wrote: one line each, naming it, nothing written, whatever the other
    folders hold; a run that logged no epoch yet is said to give no row; Part 2's results table is never --out."""
    from minbert.runs.outputs import RESULTS_TABLE
    good = tmp_path / "good"
    good.mkdir()
    (good / "multitask-log.jsonl").write_text(json.dumps(
        {"run": "good", "pipeline": "multitask", "model": "multitask", "epoch": 0, "dev_score": 0.5, "dev": {},
         "seconds": 1.0, "loss_terms": {}}) + "\n")
    (tmp_path / "afile").write_text("x")
    (tmp_path / "plain").mkdir()
    (tmp_path / "ensemble").mkdir()
    (tmp_path / "ensemble" / ".minbert-run").write_text('{"pipeline": "ensemble"}')  # its run folder's mark
    out = tmp_path / "rows.csv"
    for bad, why in (("nope", "no such run folder"), ("afile", "a file; give the run folder it lies in"),
                     ("plain", r"no run log \(\*-log.jsonl\) in it: not a run folder"),
                     ("ensemble", r"no run log \(\*-log.jsonl\) in it: the folder of an ensemble.py run, which "
                                  r"logged no epoch")):
        with pytest.raises(MinbertError, match=rf"^{tmp_path / bad}: {why}$"):
            collect_logs.main([str(good), str(tmp_path / bad), "--out", str(out)])
        assert not out.exists()
    early = tmp_path / "early"
    early.mkdir()
    (early / "multitask-log.jsonl").write_text(json.dumps(
        {"run": "early", "pipeline": "multitask", "model": "multitask", "epoch": -1, "dev_score": 0.1, "dev": {},
         "seconds": 0.0, "loss_terms": {}}) + "\n")
    collect_logs.main([str(good), str(early), "--out", str(out)])
    assert f"note: {early}: no epoch logged yet" in capsys.readouterr().out
    assert [r["run"] for r in csv.DictReader(out.open())] == ["good"]
    results = tmp_path / "multitask-results.csv"
    results.write_text(",".join(RESULTS_TABLE) + "\n")
    with pytest.raises(MinbertError, match=r"--out .*multitask-results.csv: the results table Part 2's runs append "
                                           r"their rows to, which no tool replaces"):
        collect_logs.main([str(good), "--out", str(results)])


def test_a_run_folder_given_twice_is_one_line(tmp_path):
    from tests.processes import run_main
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "m-log.jsonl").write_text("")
    out = run_main("tools/collect_logs.py", str(tmp_path / "r"), str(tmp_path / "r") + "/", "--out",
                   str(tmp_path / "rows.csv"))
    assert out.returncode == 2 and out.stderr.strip().endswith("/r: given twice; each run's rows are written once")
    assert not (tmp_path / "rows.csv").exists()
