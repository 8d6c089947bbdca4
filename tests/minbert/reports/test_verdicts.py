"""reports/verdicts.py: Holm-Bonferroni runs over every row together, each row's verdict follows its adjusted p (over
seeds, where ASO agrees), and the Markdown table has one line per row with the numbers the verdict gives."""
import pytest

from minbert.reports.verdicts import Row, judge, table


def test_rows_are_judged_together_and_tabled():
    rows = [Row("sst", "a", "b", "0.500", "0.520", 0.02, (0.005, 0.035), 0.01),
            Row("quora", "a", "b", "0.800", "0.810", 0.01, (-0.001, 0.021), 0.03),
            Row("sts", "a", "b", "0.850", "0.840", -0.01, (-0.02, -0.004), 0.02)]
    judge(rows, 0.05)
    # sorted 0.01, 0.02, 0.03 times 3, 2, 1: 0.03, 0.04, 0.03 -> kept rising: 0.04
    assert [r.p_holm for r in rows] == pytest.approx([0.03, 0.04, 0.04])
    assert [r.verdict for r in rows] == ["better", "better", "worse"]
    judge(rows, 0.035)  # a stricter level: the second and third rows are noise now
    assert rows[1].verdict == "within noise (p = 0.04, 95% CI -0.001 to +0.021)"
    lines = table(rows)
    assert lines[0] == "| task | baseline (A) | candidate (B) | A | B | B - A | 95% CI | p (Holm) | verdict |"
    assert lines[2] == "| SST accuracy | a | b | 0.500 | 0.520 | +0.020 | +0.005 to +0.035 | 0.03 (0.01) | better |"
    assert len(lines) == 2 + len(rows)


def test_a_difference_below_the_shown_decimals_gets_the_decimals_it_needs():
    """A "worse" beside "+0.000" read as a contradiction: the row shows as many more decimals (up to three) as
    its difference and interval need; a difference that shows at three keeps three."""
    tiny = Row("sts", "a", "b", "0.8501", "0.8497", -0.0004, (-0.0009, -0.00004), 0.001)
    plain = Row("sst", "a", "b", "0.500", "0.520", 0.02, (0.005, 0.035), 0.001)
    judge([tiny, plain], 0.05)
    assert tiny.digits == 5 and plain.digits == 3
    line = table([tiny])[2]
    assert "| -0.00040 | -0.00090 to -0.00004 |" in line and line.endswith("| worse |")


def test_over_seeds_a_row_is_better_or_worse_only_where_aso_and_the_pooled_test_agree():
    seeds = [Row("mean", "a-*", "b-*", "0.70 ± 0.01 (3 seeds)", "", 0.01, (0.004, 0.016), 0.002, "ASO ...", "better"),
             Row("sst", "a-*", "b-*", "", "", 0.01, (0.004, 0.016), 0.002, "ASO ...", "within noise"),
             Row("quora", "a-*", "b-*", "", "", -0.01, (-0.02, 0.001), 0.1, "ASO ...", "worse"),
             Row("sts", "a-*", "b-*", "", "", 0.01, (-0.004, 0.016), 0.4, "ASO needs ≥ 3 seeds", "")]
    judge(seeds, 0.05)
    assert seeds[0].verdict == "better"
    assert seeds[1].verdict == "within noise over seeds; dev set: better"
    assert seeds[2].verdict == "worse over seeds; dev set: within noise (p = 0.2, 95% CI -0.020 to +0.001)"
    assert seeds[3].verdict.startswith("untested over seeds; dev set: within noise (p = 0.4, ")
    assert table(seeds, groups=True)[0].endswith("| p (Holm) | seeds | verdict |")


@pytest.mark.parametrize("count, resamples, least, said", [
    (4, 80, 1, False), (4, 79, 1, True),      # permutation p >= 1/(1+R); Holm's p = 4 p must be below 0.05
    (4, 160, 2, False), (4, 159, 2, True),    # the pooled bootstrap's two-sided p >= 2/(1+R)
])
def test_too_few_resamples_for_any_verdict_is_said_from_both_sides_of_the_bound(count, resamples, least, said):
    from minbert.reports.verdicts import check_resamples
    lines = []
    check_resamples(count, resamples, 0.05, least, log=lines.append)
    assert bool(lines) == said
    if said:
        need = 80 if least == 1 else 160
        assert f"give --resamples {need} or more for a verdict" in lines[0]
