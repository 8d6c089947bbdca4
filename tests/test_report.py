"""report.py on tiny generated runs: the files appear as valid PNGs of the stated size, the numbers in the
figures are the ones a hand count or evaluation.py gives, and bad logs are one line."""
import json
import struct
import subprocess
import sys

import numpy as np
import pytest

import report
from conftest import ROOT, part1_args
from evaluation import pearson, write_dev_scores
from utils import MinbertError


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


class FakeData:
    """The few TaskData fields write_dev_scores reads."""

    def __init__(self, ids, texts, labels):
        from types import SimpleNamespace
        import torch
        self.ids = ids
        self.examples = [SimpleNamespace(texts=t) for t in texts]
        self.scored = np.array([l is not None for l in labels])
        self.labels = torch.tensor([0 if l is None else float(l) for l in labels], dtype=torch.float64)

    def __len__(self):
        return len(self.ids)


def make_multitask_run(folder, name="tiny", means=(0.50, 0.62, 0.60), seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    with open(folder / "multitask.jsonl", "w") as fp:
        for e, m in enumerate(means):
            fp.write(json.dumps({"epoch": e, "train_loss": 2.0 - 0.3 * e, "seconds": 60.0, "run": name,
                                 "dev": {"sst": m - 0.1, "quora": m + 0.1, "sts": 2 * m - 1}, "dev_mean": m}) + "\n")
    n = 40
    sst_gold = rng.integers(0, 5, n)
    sst_logits = rng.normal(size=(n, 5)).astype(np.float32)
    sst_logits[np.arange(n), sst_gold] += 1.5 * (rng.random(n) < 0.6)
    write_dev_scores(folder / "sst-dev-scores.npz", "sst",
                     FakeData([f"s{i}" for i in range(n)], [(f"sentence {i}",) for i in range(n)], list(sst_gold)),
                     sst_logits, sst_logits.argmax(-1))
    q_gold = rng.integers(0, 2, n)
    q_logit = (rng.normal(size=n) + 2 * (q_gold - 0.5)).astype(np.float32)
    labels = [int(g) for g in q_gold]
    labels[3] = None  # a broken course row: predicted, not scored
    write_dev_scores(folder / "para-dev-scores.npz", "quora",
                     FakeData([f"q{i}" for i in range(n)], [(f"a {i}", f"b {i}") for i in range(n)], labels),
                     q_logit, (q_logit > 0).astype(int))
    s_gold = rng.uniform(0, 5, n)
    s_pred = np.clip(s_gold + rng.normal(scale=1.0, size=n), 0, 5)
    write_dev_scores(folder / "sts-dev-scores.npz", "sts",
                     FakeData([f"t{i}" for i in range(n)], [(f"x {i}", f"y {i}") for i in range(n)], list(s_gold)),
                     s_pred, s_pred)
    return folder, {"sst": (sst_gold, sst_logits.argmax(-1)), "sts": (s_gold, s_pred)}


def test_report_writes_every_figure_and_a_markdown_page(tmp_path):
    run, truth = make_multitask_run(tmp_path / "runs" / "tiny")
    md, figs = report.report([run], tmp_path / "out")
    names = sorted(p.name for p in figs)
    assert names == ["curves-multitask.png", "run1-quora-pr.png", "run1-sst-confusion.png", "run1-sts.png"]
    for p in figs:
        w, h = png_size(p)
        assert 100 * 3 <= w <= 200 * 18 and 100 * 3 <= h <= 200 * 6  # inches x 100-200 dpi
    assert png_size(tmp_path / "out" / "curves-multitask.png") == (int(3.4 * 5 * report.DPI), int(3.4 * report.DPI))
    text = md.read_text()
    for p in figs:  # relative paths, so the page opens with its images beside it
        assert f"]({p.name})" in text
    assert "| tiny | multitask | 1 | 3 |" in text  # best epoch 1 (mean 0.62)
    assert "Most wrong dev examples (sts)" in text


def test_confusion_counts_equal_a_hand_count(tmp_path):
    run, truth = make_multitask_run(tmp_path / "r")
    gold, pred = truth["sst"]
    hand = np.zeros((5, 5), dtype=int)
    for g, p in zip(gold, pred):
        hand[g][p] += 1
    _, m = report.plot_confusion(report.load_scores(run / "sst-dev-scores.npz"), "r", "sst", tmp_path / "c.png")
    assert (m == hand).all() and m.sum() == len(gold)


def test_scatter_r_is_evaluations_pearson(tmp_path):
    run, truth = make_multitask_run(tmp_path / "r")
    gold, pred = truth["sts"]
    _, stats = report.plot_sts(report.load_scores(run / "sts-dev-scores.npz"), "r", tmp_path / "s.png")
    assert stats["pearson"] == pytest.approx(pearson(pred, gold), abs=1e-6)


def test_quora_leaves_unlabelled_rows_out(tmp_path):
    run, _ = make_multitask_run(tmp_path / "r")
    s = report.load_scores(run / "para-dev-scores.npz")
    assert np.isnan(s["gold"][3]) and len(s["ids"]) == 40
    _, stats = report.plot_quora(s, "r", tmp_path / "q.png")
    keep = ~np.isnan(s["gold"])
    assert stats["accuracy"] == pytest.approx(np.mean((s["output"][keep] > 0) == s["gold"][keep]))


def test_several_runs_are_overlaid_with_a_legend(tmp_path):
    a, _ = make_multitask_run(tmp_path / "a", name="run-a")
    b, _ = make_multitask_run(tmp_path / "b", name="run-b", means=(0.55, 0.58), seed=1)
    md, figs = report.report([a, b / "multitask.jsonl"], tmp_path / "out")
    text = md.read_text()
    assert "run-a" in text and "run-b" in text and "run2-sts.png" in text


def test_results_table_is_ranked_by_mean(tmp_path, capsys):
    p = tmp_path / "results.csv"
    p.write_text("run,training,mean,sst_acc\nlow,annealed,0.60,0.4\nhigh,annealed,0.74,0.5\nmid,annealed,0.70,0.45\n")
    rows, fig = report.results_view(p, tmp_path / "res")
    assert [r["run"] for r in rows] == ["high", "mid", "low"]
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:2] == ["1", "high"] and lines[3].split()[:2] == ["3", "low"]
    assert png_size(fig)[0] == 7 * report.DPI


def test_missing_or_truncated_log_is_one_line(tmp_path):
    run, _ = make_multitask_run(tmp_path / "r")
    with open(run / "multitask.jsonl", "a") as fp:
        fp.write('{"epoch": 3, "train_lo')
    with pytest.raises(MinbertError, match=r"multitask.jsonl: line 4: truncated or not JSON"):
        report.report([run], tmp_path / "out")
    out = subprocess.run([sys.executable, "report.py", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o")],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.strip() == f"error: {tmp_path / 'nope.jsonl'}: log not found"


def test_a_real_part1_run_reports(tmp_path, course_data, tiny_model):
    """classifier.py writes the log and dev scores report.py reads; its confusion matrix is 2x2 for CFIMDB."""
    import classifier
    classifier.main(part1_args(tmp_path, course_data, tiny_model, "--datasets", "cfimdb"))
    assert not list((tmp_path / "pred").glob("*.npz"))  # scores stay in the run folder, out of the zip
    md, figs = report.report([tmp_path / "ck"], tmp_path / "out")
    assert sorted(p.name for p in figs) == ["curves-classifier.png", "run1-cfimdb-confusion.png"]
    s = report.load_scores(tmp_path / "ck" / "last-linear-layer-cfimdb-dev-scores.npz")
    assert s["output"].shape == (16, 2)


def test_early_stopped_runs_and_bad_inputs_are_read_or_refused_in_one_line(tmp_path, capsys):
    run, _ = make_multitask_run(tmp_path / "r")
    with open(run / "multitask.jsonl", "a") as fp:  # the line a run that stopped early ends its log with
        fp.write(json.dumps({"run": "tiny", "stopped": "stopping early: ..."}) + "\n")
    (run / "sts-dev-scores.npz").write_bytes(b"not an npz")
    md, figs = report.report([run], tmp_path / "out")
    text = md.read_text()
    assert "### STS: left out" in text and "cannot read dev scores" in text  # the rest of the report is there
    assert "run1-sst-confusion.png" in text and "warning:" in capsys.readouterr().out
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(MinbertError, match="binary.jsonl: not a text file, so not a run log"):
        report.report([binary], tmp_path / "out2")
    (tmp_path / "file").write_text("a file")
    with pytest.raises(MinbertError, match=r"--out .*file/inside: .*file is a file; report.py writes a folder"):
        report.report([run], tmp_path / "file" / "inside")
    results = tmp_path / "results.csv"
    results.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(MinbertError, match="results.csv: not a text file"):
        report.results_view(results, tmp_path / "res")


def test_a_nan_row_ranks_last(tmp_path):
    p = tmp_path / "results.csv"
    p.write_text("run,mean\nok,0.60\ndiverged,nan\nbest,0.74\n")
    rows, _ = report.results_view(p, tmp_path / "res")
    assert [r["run"] for r in rows] == ["best", "ok", "diverged"]


def test_a_run_whose_every_dev_score_is_nan_reports(tmp_path, capsys):
    """A diverged run's log (an earlier minbert kept training it): no traceback, the table says it diverged."""
    folder = tmp_path / "run"
    folder.mkdir()
    with open(folder / "multitask-log.jsonl", "w") as fp:
        for e in range(2):
            fp.write(json.dumps({"run": "r", "pipeline": "multitask", "model": "multitask", "epoch": e,
                                 "train_loss": float("nan"), "dev": {"sst": 0.2, "quora": 0.6, "sts": float("nan")},
                                 "dev_score": float("nan"), "seconds": 1.0}) + "\n")
    md, figures = report.report([folder], tmp_path / "out")
    assert "every dev score is NaN: the run diverged" in md.read_text() and len(figures) == 1
    assert "every dev score is NaN" in capsys.readouterr().out
