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
    assert "Holm-Bonferroni over the 4 rows" in text and "![differences" in text
    assert png_size(md.parent / "comparison.png")[0] > 500
    assert snapshot(tmp_path / "runs") == before  # nothing written into a run folder
    again, md2 = compare(CompareSettings(runs=(str(a), str(b)), resamples=2000))
    assert tmp_path / md2 != md  # a second folder, the first kept
    assert [r.interval for r in again] == [r.interval for r in rows]  # the same seed, the same intervals
    with pytest.raises(MinbertError, match=r"--out .*runs/a/cmp: inside .*runs/a, the folder of a run"):
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
