"""reports/compare.py on tiny run folders: two runs give a row per dev set and the multitask mean, Holm-adjusted,
with verdicts in words, a Markdown table and a figure in a new folder (the runs untouched, the same seed giving the
same intervals); runs of other tasks are one line."""
import pytest

from minbert.reports.compare import CompareSettings, compare, compare_runs
from minbert.reports.significance import holm
from tests.course import make_part2_run, png_size, snapshot
from utils import MinbertError


def test_two_runs_give_a_row_per_dev_set_and_the_mean_judged_together(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    a, b = make_part2_run(tmp_path / "runs" / "a", 0.6, 1), make_part2_run(tmp_path / "runs" / "b", 0.75, 2)
    before = snapshot(tmp_path / "runs")
    rows, md = compare(CompareSettings(runs=(str(a), str(b)), resamples=2000, command=("--compare", "a", "b")))
    assert [r.task for r in rows] == ["sst", "quora", "sts", "mean"]
    assert [r.p_holm for r in rows] == pytest.approx(holm([r.p for r in rows]))
    assert all(r.verdict == "better" and r.interval[0] > 0 for r in rows)
    mean_a = (float(rows[0].a) + float(rows[1].a) + (float(rows[2].a) + 1) / 2) / 3
    assert float(rows[3].a) == pytest.approx(mean_a, abs=2e-3)  # the shown scores are rounded
    md = tmp_path / md
    assert md.parent.parent == tmp_path / "reports" and md.parent.name.startswith("compare-")
    text = md.read_text()
    assert "`python report.py --compare a b`" in text and "| multitask mean | a | b |" in text
    assert "Holm-Bonferroni over the 4 rows" in text and "![differences" in text and "The multitask mean is" in text
    assert png_size(md.parent / "comparison.png")[0] > 500
    assert snapshot(tmp_path / "runs") == before  # nothing written into a run folder
    again, md2 = compare(CompareSettings(runs=(str(a), str(b)), resamples=2000))
    assert tmp_path / md2 != md  # a second folder, the first kept
    assert [r.interval for r in again] == [r.interval for r in rows]  # the same seed, the same intervals
    # a compared run's folder is refused as one (it had been called a run the report is not about)
    with pytest.raises(MinbertError, match=r"--out .*runs/a/cmp: inside .*runs/a, a run's folder, .* a comparison "
                                           r"is about several runs and goes into none of their folders"):
        (a / ".minbert-run").write_text("{}")
        compare(CompareSettings(runs=(str(a), str(b)), resamples=200, out=str(a / "cmp")))


def test_a_candidate_no_better_is_within_noise_with_its_numbers(tmp_path):
    a, b = make_part2_run(tmp_path / "a", 0.6, 1), make_part2_run(tmp_path / "b", 0.6, 2)
    rows = compare_runs(CompareSettings(runs=(str(a), str(b)), resamples=2000))
    sst = rows[0]
    assert sst.verdict == (f"within noise (p = {sst.p_holm:.2g}, 95% CI {sst.interval[0]:+.3f} to "
                           f"{sst.interval[1]:+.3f})")


def test_runs_of_other_tasks_or_data_are_refused_in_one_line(tmp_path):
    a = make_part2_run(tmp_path / "a", 0.6, 1, tasks=("sst",))
    b = make_part2_run(tmp_path / "b", 0.6, 2, tasks=("sts",))
    with pytest.raises(MinbertError, match=r"b: no dev set in common with .*a \(sts against sst\): runs of different"):
        compare_runs(CompareSettings(runs=(str(a), str(b)), resamples=100))
    with pytest.raises(MinbertError, match=r"give two runs \(RUN_A RUN_B: B is compared with A\)"):
        compare_runs(CompareSettings(runs=(str(a),)))


def test_a_run_against_itself_or_a_copy_of_it_is_one_line(tmp_path):
    import shutil
    a = make_part2_run(tmp_path / "a", 0.6, 1)
    with pytest.raises(MinbertError, match=r"the same run folder twice; a run compared with itself differs by nothing"):
        compare_runs(CompareSettings(runs=(str(a), str(tmp_path / "." / "a")), resamples=100))
    shutil.copytree(a, tmp_path / "copy")
    with pytest.raises(MinbertError, match=r"copy: the same dev outputs as .*a on every example of sst, quora, sts "
                                           r"\(a copy of that run\?\)"):
        compare_runs(CompareSettings(runs=(str(a), str(tmp_path / "copy")), resamples=100))


def test_what_one_run_lacks_is_named_not_dropped(tmp_path, capsys):
    """A Part 1 run (SST) against a Part 2 run: SST is compared, and the line says Quora and STS were not."""
    a = make_part2_run(tmp_path / "p1", 0.6, 1, tasks=("sst",))
    b = make_part2_run(tmp_path / "p2", 0.7, 2)
    rows = compare_runs(CompareSettings(runs=(str(a), str(b)), resamples=200))
    assert [r.task for r in rows] == ["sst"]
    assert "note: p2 against p1: not compared: Quora (only p2 has it), STS (only p2 has it)" in capsys.readouterr().out


def test_a_dev_set_the_metric_is_undefined_on_is_one_line_and_a_lone_task_has_no_mean(tmp_path):
    """STS scored on one pair (or on pairs of one gold score): Pearson r is undefined there, never 0 against 0;
    STS alone has no multitask mean, and the method says nothing of one."""
    from tests.course import make_compared_run
    ids = [f"e{k}" for k in range(5)]  # STS alone, where it is defined: no multitask mean, none explained
    a = make_compared_run(tmp_path / "sts-a", {"sts": (ids, [0.0, 1.0, 2.0, 3.0, 4.0], [0.5, 1.0, 2.5, 3.0, 4.0])})
    b = make_compared_run(tmp_path / "sts-b", {"sts": (ids, [0.0, 1.0, 2.0, 3.0, 4.0], [1.0, 0.5, 2.0, 3.5, 4.5])})
    rows, md = compare(CompareSettings(runs=(str(a), str(b)), resamples=100, out=str(tmp_path / "cmp")))
    assert [r.task for r in rows] == ["sts"] and "multitask mean" not in (tmp_path / md).read_text()
    for name, gold in (("one", [3.0]), ("flat", [2.0, 2.0, 2.0])):
        ids = [f"e{k}" for k in range(len(gold))]
        a = make_compared_run(tmp_path / f"{name}-a", {"sts": (ids, gold, [1.0 + k for k in range(len(gold))])})
        b = make_compared_run(tmp_path / f"{name}-b", {"sts": (ids, gold, [4.0 - k for k in range(len(gold))])})
        with pytest.raises(MinbertError, match=r"sts-dev-scores.npz: .*Pearson r, its dev score, is undefined"):
            compare_runs(CompareSettings(runs=(str(a), str(b)), resamples=100))


def test_few_resamples_are_refused_and_an_interval_beside_its_point_is_drawn(tmp_path):
    """--resamples below 100 leaves a 95% interval no room; at any count the figure draws an interval that does
    not hold the observed difference (a percentile interval need not), where matplotlib's error bars failed."""
    import report
    from minbert.reports.figures import plot_differences
    from minbert.reports.verdicts import Row
    with pytest.raises(MinbertError, match=r"argument --resamples: 5 must be an integer from 100 to 1,000,000"):
        report.main(["--compare", "a", "b", "--resamples", "5"])
    row = Row("sst", "a", "b", "0.500", "0.520", 0.02, (0.025, 0.04), 0.3)
    row.p_holm, row.verdict = 0.3, "within noise"
    path = plot_differences([row], {"sst": "SST accuracy"}, tmp_path / "c.png", "b against a")
    assert png_size(path)[0] > 300


def test_an_out_that_is_a_dangling_link_is_refused_before_the_work(tmp_path, monkeypatch):
    from minbert.reports import compare as module
    a, b = make_part2_run(tmp_path / "a", 0.6, 1), make_part2_run(tmp_path / "b", 0.7, 2)
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    monkeypatch.setattr(module, "compare_runs", lambda s: pytest.fail("compared before --out was checked"))
    with pytest.raises(MinbertError, match=r"--out .*link: .*link is a link to .*gone, which does not exist"):
        compare(CompareSettings(runs=(str(a), str(b)), resamples=100, out=str(tmp_path / "link")))
    assert not (tmp_path / "gone").exists()


def test_a_rows_interval_is_the_95_percent_bootstrap_interval_by_hand(tmp_path):
    """SST accuracy, one dev set, 1000 resamples of seed 0: the row's interval is the 2.5th and 97.5th percentiles
    of B - A over the same index draws, computed here from the two runs' right and wrong answers."""
    import numpy as np
    from minbert.reports.dev_outputs import read_run
    a = make_part2_run(tmp_path / "a", 0.6, 1, tasks=("sst",))
    b = make_part2_run(tmp_path / "b", 0.65, 2, tasks=("sst",))
    (row,) = compare_runs(CompareSettings(runs=(str(a), str(b)), resamples=1000, seed=0))
    right = [read_run(f).tasks["sst"].stats[:, 0] for f in (a, b)]
    n = len(right[0])
    idx = np.random.default_rng(0).integers(0, n, (1000, n))
    boot = right[1][idx].mean(1) - right[0][idx].mean(1)
    assert row.interval == pytest.approx(tuple(np.percentile(boot, [2.5, 97.5])), abs=1e-12)
    assert row.diff == pytest.approx(right[1].mean() - right[0].mean())


def test_ctrl_c_once_the_comparison_is_written_says_it_is_complete(tmp_path, monkeypatch):
    """A Ctrl-C during the last lines printed stops no writing: the line says the files are whole, and where."""
    import builtins
    from minbert.reports import compare as compare_module
    from tests.processes import run_main
    a, b = make_part2_run(tmp_path / "runs" / "a", 0.6, 1), make_part2_run(tmp_path / "runs" / "b", 0.75, 2)

    def ctrl_c_at_the_last_line(*args, **kw):
        if str(args[0]).startswith("comparison written"):
            raise KeyboardInterrupt
        builtins.print(*args, **kw)
    monkeypatch.setattr(compare_module, "print", ctrl_c_at_the_last_line, raising=False)
    done = run_main("report.py", "--compare", a, b, "--resamples", "200", "--out", "cmp", cwd=tmp_path)
    assert done.returncode == 130 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == ("interrupted: comparison.png, comparison.md in cmp/ were written "
                                                   "whole before the interrupt took effect")
    assert (tmp_path / "cmp" / "comparison.md").is_file() and (tmp_path / "cmp" / "comparison.png").is_file()


def test_a_report_folder_starts_with_no_earlier_hint(tmp_path):
    """report.py --results then the runs' report: the results table's "written whole" is not said of the report
    the Ctrl-C stopped."""
    from minbert import cli
    from minbert.reports.report import OutFolder
    cli.set_interrupt_hint("results.png in reports/results/ were written whole")
    OutFolder(tmp_path / "r")
    assert cli._INTERRUPT_HINT["text"] is None
