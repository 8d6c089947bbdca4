"""reports/report.py on tiny generated runs: every figure as a valid PNG of the stated size and report.md; several
runs overlaid; a results table ranked; early-stopped, diverged and bad runs read or refused in one line."""
import json
import re
import shutil

import pytest

from minbert.reports.figures import DPI
from minbert.reports.read import load_scores
from minbert.reports.report import report, results_view
from tests.course import make_multitask_run, part1_args, png_size, write_course_data
from utils import MinbertError


def test_report_writes_every_figure_and_a_markdown_page(tmp_path):
    run, truth = make_multitask_run(tmp_path / "runs" / "tiny")
    md, figs = report([run], tmp_path / "out")
    names = sorted(p.name for p in figs)
    assert names == ["curves-multitask.png", "run1-quora-pr.png", "run1-sst-confusion.png", "run1-sts.png"]
    for p in figs:
        w, h = png_size(p)
        assert 100 * 3 <= w <= 200 * 18 and 100 * 3 <= h <= 200 * 6  # inches x 100-200 dpi
    assert png_size(tmp_path / "out" / "curves-multitask.png") == (int(3.4 * 5 * DPI), int(3.4 * DPI))
    text = md.read_text()
    for p in figs:  # relative paths, so the page opens with its images beside it
        assert f"]({p.name})" in text
    assert "| tiny | multitask | 1 | 3 |" in text  # best epoch 1 (mean 0.62)
    assert "Most wrong dev examples (sts)" in text


def test_several_runs_are_overlaid_with_a_legend(tmp_path):
    a, _ = make_multitask_run(tmp_path / "a", name="run-a")
    b, _ = make_multitask_run(tmp_path / "b", name="run-b", means=(0.55, 0.58), seed=1)
    md, figs = report([a, b / "multitask.jsonl"], tmp_path / "out")
    text = md.read_text()
    assert "run-a" in text and "run-b" in text and "run2-sts.png" in text


def test_results_table_is_ranked_by_mean(tmp_path, capsys):
    p = tmp_path / "results.csv"
    p.write_text("run,training,mean,sst_acc\nlow,annealed,0.60,0.4\nhigh,annealed,0.74,0.5\nmid,annealed,0.70,0.45\n")
    rows, fig = results_view(p, tmp_path / "res")
    assert [r["run"] for r in rows] == ["high", "mid", "low"]
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split()[:2] == ["1", "high"] and lines[3].split()[:2] == ["3", "low"]
    assert png_size(fig)[0] == 7 * DPI
    p.write_text("run,mean\na,0.5\nb,nan\nc,1\nd,0\n")  # a diverged run (NaN) and the bounds are means
    assert [r["run"] for r in results_view(p, tmp_path / "res2")[0]] == ["c", "a", "d", "b"]
    for value in ("inf", "1e308", "-0.1", "1.0001"):
        p.write_text(f"run,mean\na,0.5\nb,{value}\n")
        shown = re.escape(f"{float(value):g}")
        with pytest.raises(MinbertError, match=rf"results.csv: line 3: mean {shown} is no dev mean"):
            results_view(p, tmp_path / "res3")
    p.write_text("run,mean\na,0.5\nb,0.6\na,0.5\n")
    with pytest.raises(MinbertError, match=r"results.csv: line 4 repeats line 2 \(run a\): each run is ranked once"):
        results_view(p, tmp_path / "res4")


def test_results_say_when_runs_differ_in_checkpoint_or_dev_data(tmp_path, course_data, tiny_model, monkeypatch,
                                                                capsys):
    """Three runs in one results table: two on the same dev files, one on an edited STS dev file, one more from
    another checkpoint; each mix is one note, and a row without a run folder is said to be unchecked."""
    import multitask_classifier as mt
    from tests.checkpoints import make_hf_checkpoint
    from tests.course import part2_args
    monkeypatch.chdir(tmp_path)
    table = tmp_path / "predictions" / "multitask-results.csv"
    other = write_course_data(tmp_path / "other", seed=0)
    (other / "sts-dev.csv").write_text((other / "sts-dev.csv").read_text().replace("\t", "\t ", 1))  # one byte more
    second, _ = make_hf_checkpoint(tmp_path / "second", seed=1)
    for name, data, model in (("a", course_data, tiny_model), ("b", course_data, tiny_model),
                              ("c", other, tiny_model), ("d", course_data, second)):
        args = part2_args(tmp_path, data, model, "--epochs", "1", "--steps_per_epoch", "1", "--run_name", name)
        args[args.index("--results") + 1] = str(table)
        mt.main(args)
    capsys.readouterr()
    results_view(table, tmp_path / "res")
    out = capsys.readouterr().out
    assert f"note: the runs start from 2 checkpoints ({', '.join(sorted([str(tiny_model), str(second)]))})" in out
    assert "note: the runs were scored on 2 different dev sets (by their files' contents: a, b, d; c)" in out
    shutil.rmtree(tmp_path / "runs" / "d")  # deleted to save space, say
    results_view(table, tmp_path / "res2")
    assert "note: 1 run(s) (d) have no run folder under runs/ here recording their flags" in capsys.readouterr().out


def test_a_real_part1_run_reports(tmp_path, course_data, tiny_model):
    """classifier.py writes the log and dev scores report.py reads; its confusion matrix is 2x2 for CFIMDB."""
    import classifier
    classifier.main(part1_args(tmp_path, course_data, tiny_model, "--datasets", "cfimdb"))
    assert not list((tmp_path / "pred").glob("*.npz"))  # scores stay in the run folder, out of the zip
    md, figs = report([tmp_path / "ck"], tmp_path / "out")
    assert sorted(p.name for p in figs) == ["curves-classifier.png", "run1-cfimdb-confusion.png"]
    s = load_scores(tmp_path / "ck" / "last-linear-layer-cfimdb-dev-scores.npz")
    assert s["output"].shape == (16, 2)


def test_early_stopped_runs_and_bad_inputs_are_read_or_refused_in_one_line(tmp_path, capsys):
    run, _ = make_multitask_run(tmp_path / "r")
    with open(run / "multitask.jsonl", "a") as fp:  # the line a run that stopped early ends its log with
        fp.write(json.dumps({"run": "tiny", "stopped": "stopping early: ..."}) + "\n")
    (run / "sts-dev-scores.npz").write_bytes(b"not an npz")
    md, figs = report([run], tmp_path / "out")
    text = md.read_text()
    assert "### STS: left out" in text and "not a dev-scores file" in text  # the rest of the report is there
    assert "allow_pickle" not in text
    assert "run1-sst-confusion.png" in text and "warning:" in capsys.readouterr().out
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(MinbertError, match="binary.jsonl: not a text file, so not a run log"):
        report([binary], tmp_path / "out2")
    (tmp_path / "file").write_text("a file")
    with pytest.raises(MinbertError, match=r"--out .*file/inside: .*file is a file; report.py writes a folder"):
        report([run], tmp_path / "file" / "inside")
    results = tmp_path / "results.csv"
    results.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(MinbertError, match="results.csv: not a text file"):
        results_view(results, tmp_path / "res")
    results.write_text("my,own\n1,2\n")  # the user's own CSV: what it is not, not a "truncated row"
    with pytest.raises(MinbertError, match=r"results.csv: not a results table \(its header is 'my,own', without the "
                                           r"run and mean columns"):
        results_view(results, tmp_path / "res")
    results.write_text("")
    with pytest.raises(MinbertError, match=r"results.csv: the file is empty, not a results table"):
        results_view(results, tmp_path / "res")


def test_a_nan_row_ranks_last(tmp_path):
    p = tmp_path / "results.csv"
    p.write_text("run,mean\nok,0.60\ndiverged,nan\nbest,0.74\n")
    rows, _ = results_view(p, tmp_path / "res")
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
    md, figures = report([folder], tmp_path / "out")
    assert "every dev score is NaN: the run diverged" in md.read_text() and len(figures) == 1
    assert "every dev score is NaN" in capsys.readouterr().out


def test_a_report_interrupted_half_way_leaves_out_as_it_was_and_runs_again(tmp_path, monkeypatch):
    """Ctrl-C after the curves are drawn, before the diagnostics: --out holds nothing of that report (before, the
    curves were there unrecorded, and the next report refused them as the user's); the same command then works."""
    from minbert.reports import report as module
    run, _ = make_multitask_run(tmp_path / "runs" / "tiny")
    report([run], tmp_path / "out")
    before = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}

    def interrupted(*a, **kw):
        raise KeyboardInterrupt
    with monkeypatch.context() as m:
        m.setattr(module, "plot_sts", interrupted)
        with pytest.raises(KeyboardInterrupt):
            report([run], tmp_path / "fresh")
        with pytest.raises(KeyboardInterrupt):
            second, _ = make_multitask_run(tmp_path / "runs" / "tiny2", seed=1)
            report([run, second], tmp_path / "out")  # another report over the first: its curves differ
    assert not (tmp_path / "fresh").exists() or not list((tmp_path / "fresh").iterdir())
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == before
    md, figs = report([run], tmp_path / "fresh")
    assert md == tmp_path / "fresh" / "report.md" and all(f.parent == tmp_path / "fresh" and f.is_file() for f in figs)


def test_a_real_gpt2_run_of_each_script_reports(tmp_path, course_data, tiny_gpt2):
    """Build GPT-2's three scripts write logs report.py draws: Part 1's and the cloze task's as Part 1's (with their
    confusion matrix and precision-recall curve), the sonnets' loss and perplexity, with their dev completions."""
    from gpt2 import classifier, paraphrase_detection, sonnet_generation
    from tests.gpt2.test_sonnet_pipeline import sonnet_argv, sonnet_files
    from tests.checkpoints import make_gpt2_checkpoint
    common = ["--pretrained", str(tiny_gpt2), "--data_dir", str(course_data), "--epochs", "2", "--lr", "1e-3",
              "--predictions_dir", str(tmp_path / "pred")]
    classifier.main(common + ["--datasets", "sst", "--run_dir", str(tmp_path / "cls")])
    paraphrase_detection.main(common + ["--run_dir", str(tmp_path / "para")])
    model = make_gpt2_checkpoint(tmp_path / "m", n_positions=512)
    sonnet_generation.main(sonnet_argv(tmp_path / "son", model, sonnet_files(tmp_path / "data")))
    md, figs = report([tmp_path / "cls", tmp_path / "para", tmp_path / "son" / "run"], tmp_path / "out")
    assert sorted(p.name for p in figs) == ["curves-gpt2-classifier.png", "curves-gpt2-paraphrase.png",
                                            "curves-gpt2-sonnet.png", "run1-sst-confusion.png", "run2-quora-pr.png"]
    text = md.read_text()
    assert "| cls (sst) | gpt2-classifier | " in text and "| para (quora) | gpt2-paraphrase | " in text
    assert "| run | gpt2-sonnet | 0 | 1 | true dev sonnets' perplexity " in text
    assert f"dev sonnets: {tmp_path / 'son' / 'run' / 'generated_sonnets_dev.txt'}" in text
    assert png_size(tmp_path / "out" / "curves-gpt2-sonnet.png") == (int(3.4 * 2 * DPI), int(3.4 * DPI))


def test_a_run_given_twice_is_reported_once_or_refused(tmp_path):
    run, _ = make_multitask_run(tmp_path / "r")
    with pytest.raises(MinbertError, match=r"multitask.jsonl: given twice \(a run, its checkpoint or its log each "
                                           r"stand for it\)"):
        report([run, run / "multitask.jsonl"], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_run_still_training_is_said_to_be(tmp_path, capsys):
    """report.py and report.py --compare on a run whose process holds its folder now: its epochs so far, and no
    dev outputs yet because it writes them when it ends (not 'did not finish', which reads as a crash)."""
    import os
    from minbert.reports.dev_outputs import read_run
    from minbert.runs.lock import RunLock
    run, _ = make_multitask_run(tmp_path / "live")
    for scores in run.glob("*-dev-scores.npz"):
        scores.unlink()
    lock = RunLock(run).acquire("--run_dir", "multitask").claim()
    try:
        md, _ = report([run], tmp_path / "out")
        assert "| tiny | multitask | 1 | 3 so far (still training) |" in md.read_text()
        assert f"note: tiny is still training (process {os.getpid()} since " in capsys.readouterr().out
        with pytest.raises(MinbertError, match=rf"a multitask_classifier.py run still training \(process "
                                               rf"{os.getpid()} since .*\); a run writes them when it ends$"):
            read_run(run)
    finally:
        lock.release()
    # the other side: its process gone, the run did not finish
    md, _ = report([run], tmp_path / "out2")
    assert "| tiny | multitask | 1 | 3 |" in md.read_text() and "still training" not in capsys.readouterr().out
    with pytest.raises(MinbertError, match="a multitask_classifier.py run that did not finish$"):
        read_run(run)


def test_an_out_that_is_a_pipe_or_a_link_to_a_file_is_named_as_what_it_is(tmp_path):
    import os
    run, _ = make_multitask_run(tmp_path / "run")
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "f.txt").write_text("mine\n")
    (tmp_path / "link").symlink_to(tmp_path / "f.txt")
    for out, what in (("pipe", "a named pipe"), ("link", r"a link to a file \(.*f.txt\)")):
        with pytest.raises(MinbertError, match=rf"--out .*{out}: .*{out} is {what}; report.py writes a folder of "
                                               r"figures there"):
            report([run], tmp_path / out)
    assert (tmp_path / "f.txt").read_text() == "mine\n"
