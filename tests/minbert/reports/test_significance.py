"""reports/significance.py against known answers: identical systems give p = 1 and an interval of 0; on 1,000
synthetic examples 5% more right is better at 0.05 and 0.5% more is not; the bootstrap interval is
scipy.stats.bootstrap's from the same resamples and the permutation p scipy.stats.permutation_test's; the metrics
from summed statistics are minbert/scoring.py's and sacrebleu's; ASO is deepsig's on the same draws; Holm, Welch
and the seeds needed are their hand computations; Student's t and the incomplete beta function are scipy's."""
import math

import numpy as np
import pytest
import sacrebleu
from scipy import special, stats

from minbert.course_data import read_sonnets
from minbert.reports import significance as S
from minbert.scoring import pearson as pearson_r
from tests.course import real_data_folder


def two_systems(n, right_a, right_b, seed=0):
    """0/1 correctness of two systems on n examples, right on exactly right_a and right_b of them, their errors
    independent."""
    rng = np.random.default_rng(seed)
    a, b = np.zeros(n), np.zeros(n)
    a[rng.permutation(n)[:right_a]] = 1
    b[rng.permutation(n)[:right_b]] = 1
    return a[:, None], b[:, None]


def test_identical_systems_give_p_1_and_an_interval_of_0():
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 300)
    pred = gold + rng.normal(size=300)
    for metric, x in ((S.ACCURACY, two_systems(300, 200, 200)[0]), (S.PEARSON, S.pearson_stats(pred, gold))):
        r = S.paired(metric, x, x.copy(), 2000, rng)
        assert r.observed == 0 and r.p == 1.0
        assert r.interval() == (0.0, 0.0)
        assert S.verdict(r.observed, r.p, r.interval()) == "within noise (p = 1, 95% CI +0.000 to +0.000)"


@pytest.mark.parametrize("construction", ["independent errors", "B right wherever A is"])
def test_five_percent_more_right_of_1000_is_better_and_half_a_percent_is_not(construction):
    n, right_a = 1000, 800
    for more, expected in ((50, "better"), (5, "within noise")):
        if construction == "independent errors":
            a, b = two_systems(n, right_a, right_a + more, seed=more)
        else:
            a = np.zeros((n, 1))
            a[:right_a] = 1
            b = a.copy()
            b[right_a:right_a + more] = 1
        r = S.paired(S.ACCURACY, a, b, 10000, np.random.default_rng(1))
        assert r.observed == pytest.approx(more / n)
        words = S.verdict(r.observed, r.p, r.interval())
        assert words.startswith(expected), (construction, more, r.p, words)
        if construction == "independent errors":  # 5 examples B alone gets right: the bootstrap of so few
            assert (r.interval()[0] > 0) == (expected == "better")  # is optimistic; the verdict is p's


def scipy_difference(metric_of):
    """A statistic written plainly, one resample at a time, for scipy.stats.bootstrap (vectorized: rows)."""
    def statistic(x, y, *rest, axis=-1):
        if x.ndim == 1:
            return metric_of(y, *rest) - metric_of(x, *rest)
        return np.array([metric_of(y[i], *(r[i] for r in rest)) - metric_of(x[i], *(r[i] for r in rest))
                         for i in range(x.shape[0])])
    return statistic


def test_the_bootstrap_interval_is_scipys_from_the_same_resamples():
    rng = np.random.default_rng(3)
    n = 400
    gold = rng.uniform(0, 5, n)
    pa, pb = gold + rng.normal(0, 1.0, n), gold + rng.normal(0, 0.9, n)
    ours = S.paired(S.PEARSON, S.pearson_stats(pa, gold), S.pearson_stats(pb, gold), 3000,
                    np.random.default_rng(7))
    theirs = stats.bootstrap((pa, pb, gold), scipy_difference(lambda p, g: np.corrcoef(p, g)[0, 1]), paired=True,
                             vectorized=True, n_resamples=3000, method="percentile", rng=np.random.default_rng(7))
    assert ours.interval() == pytest.approx(tuple(theirs.confidence_interval), abs=5e-4)
    a, b = two_systems(n, 300, 320, seed=2)
    ours = S.paired(S.ACCURACY, a, b, 3000, np.random.default_rng(8))
    theirs = stats.bootstrap((a[:, 0], b[:, 0]), scipy_difference(np.mean), paired=True, vectorized=True,
                             n_resamples=3000, method="percentile", rng=np.random.default_rng(8))
    assert ours.interval() == pytest.approx(tuple(theirs.confidence_interval), abs=5e-4)


def test_the_permutation_p_is_scipys_exact_one():
    """14 examples: scipy enumerates all 2^14 swaps; ours draws 20,000 of them."""
    rng = np.random.default_rng(4)
    gold = rng.uniform(0, 5, 14)
    pa, pb = gold + rng.normal(0, 1.5, 14), gold + rng.normal(0, 0.7, 14)
    exact = stats.permutation_test((pa, pb), scipy_difference(lambda p: np.corrcoef(p, gold)[0, 1]),
                                   permutation_type="samples", vectorized=True, n_resamples=np.inf)
    ours = S.paired(S.PEARSON, S.pearson_stats(pa, gold), S.pearson_stats(pb, gold), 20000, rng)
    assert ours.p == pytest.approx(exact.pvalue, abs=0.01)
    assert ours.observed == pytest.approx(exact.statistic, abs=1e-12)


def test_the_metrics_from_summed_statistics_are_the_scorers():
    rng = np.random.default_rng(5)
    gold = rng.uniform(0, 5, 50)
    pred = gold + rng.normal(size=50)
    assert S.PEARSON.value(S.pearson_stats(pred, gold).sum(0), 50) == pytest.approx(pearson_r(pred, gold), abs=1e-12)
    constant = S.pearson_stats(np.full(50, 2.0), gold).sum(0)
    assert S.PEARSON.value(constant, 50) == 0.0 == pearson_r(np.full(50, 2.0), gold)
    folder = real_data_folder("TRUE_sonnets_held_out_dev.txt")
    true = [t for _, t in read_sonnets(folder / "TRUE_sonnets_held_out_dev.txt")]
    prompts = [t for _, t in read_sonnets(folder / "sonnets_held_out_dev.txt")]
    chrf = S.chrf_stats(prompts, true)
    assert chrf.shape == (len(true), 18)
    assert S.CHRF.value(chrf.sum(0), len(true)) == pytest.approx(sacrebleu.corpus_chrf(prompts, [true]).score,
                                                                 abs=1e-9)


def test_the_multitask_mean_combines_each_tasks_resamples():
    rng = np.random.default_rng(6)
    parts = [S.paired(S.ACCURACY, *two_systems(200, 120 + k, 125 + 2 * k, seed=k), 500, rng) for k in range(3)]
    mean = S.combine([(1 / 3, parts[0]), (1 / 3, parts[1]), (1 / 6, parts[2])])
    assert mean.observed == pytest.approx(parts[0].observed / 3 + parts[1].observed / 3 + parts[2].observed / 6)
    assert mean.boot[17] == pytest.approx(parts[0].boot[17] / 3 + parts[1].boot[17] / 3 + parts[2].boot[17] / 6)


def test_pooled_groups_resample_every_run_on_the_same_draw():
    runs = [two_systems(300, 200 + 5 * k, 0, seed=k)[0] for k in range(4)]
    r = S.pooled(S.ACCURACY, runs[:2], runs[2:], 1000, np.random.default_rng(0))
    assert r.observed == pytest.approx((210 + 215 - 200 - 205) / 2 / 300)
    same = S.pooled(S.ACCURACY, runs[:2], runs[:2], 1000, np.random.default_rng(0))
    assert not same.boot.any() and S.bootstrap_p(same.boot) == 1.0


def test_the_violation_ratio_is_the_hand_integral_and_aso_is_deepsigs():
    from deepsig import aso as deepsig_aso
    from deepsig.aso import compute_violation_ratio
    # quantile functions: better 0 | 3 | 3 | 4 and worse 1 | 1 | 2 | 2 on (0, 1/3, 1/2, 2/3, 1):
    # squared gaps 1, 4, 1, 4 over widths 1/3, 1/6, 1/6, 1/3; better below worse on the first alone
    assert S.violation_ratio([0, 3, 4], [1, 2]) == pytest.approx((1 / 3) / (1 / 3 + 4 / 6 + 1 / 6 + 4 / 3))
    assert S.violation_ratio([1, 2, 3], [1, 2, 3]) == 0.5  # no order at all
    rng = np.random.default_rng(9)
    for a, b in ((rng.normal(0.75, 0.01, 5), rng.normal(0.745, 0.01, 4)), (rng.normal(0.5, 0.02, 10),
                                                                           rng.normal(0.49, 0.02, 10))):
        assert S.violation_ratio(a, b) == pytest.approx(compute_violation_ratio(a, b, dt=1e-4), abs=1e-3)
        seed, count = 7, 200
        draws_a, draws_b = [], []
        for i in range(1, count + 1):  # deepsig seeds its i-th bootstrap replicate with seed + i
            np.random.seed(seed + i)
            draws_a.append(np.random.uniform(0, 1, len(a)))
            draws_b.append(np.random.uniform(0, 1, len(b)))
        ours = S.aso(a, b, 0.05, draws=(np.array(draws_a), np.array(draws_b)))
        theirs = deepsig_aso(a, b, seed=seed, num_bootstrap_iterations=count, show_progress=False)
        assert ours == pytest.approx(theirs, abs=0.005)  # deepsig integrates on a grid of step 0.005


def test_holm_welch_and_the_seeds_needed_are_the_hand_computations():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04 -> kept rising: 0.06
    assert S.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert S.holm([0.5, 0.9, 0.01]) == pytest.approx([1.0, 1.0, 0.03])  # 0.5 x 2 caps at 1, and 0.9 follows
    rng = np.random.default_rng(10)
    a, b = rng.normal(0.5, 0.01, 10), rng.normal(0.51, 0.02, 4)
    diff, (low, high), p = S.welch(a.mean(), a.std(ddof=1), 10, b.mean(), b.std(ddof=1), 4)
    assert p == pytest.approx(stats.ttest_ind(b, a, equal_var=False).pvalue)
    va, vb = a.var(ddof=1) / 10, b.var(ddof=1) / 4
    df = (va + vb) ** 2 / (va ** 2 / 9 + vb ** 2 / 3)
    assert diff == pytest.approx(b.mean() - a.mean())
    assert high - diff == pytest.approx(stats.t.ppf(0.975, df) * math.sqrt(va + vb))
    assert low == pytest.approx(2 * diff - high)
    # 2 (1.960 + 0.842)^2 = 15.7 seeds when the difference is one standard deviation
    assert S.seeds_needed(0.01, 0.01) == 16 and S.seeds_needed(0.01, 0.001) == 3
    assert S.seeds_needed(0.0, 0.01) is None and S.seeds_needed(0.01, 0.0) is None


@pytest.mark.parametrize("df", [1, 1.5, 2, 2.7, 4, 9.3, 30, 300, 1e4])
def test_students_t_is_scipys(df):
    """Welch's degrees of freedom are fractional: the t distribution is checked at fractional ones too, in both
    tails' depths, against scipy.stats.t; the incomplete beta function beneath it against scipy.special's."""
    for t in (0.0, 0.01, 0.5, 1.0, 2.0, 3.3, 10.0, 100.0):
        assert S.t_two_sided_p(t, df) == pytest.approx(2 * stats.t.sf(t, df), rel=1e-9, abs=1e-300)
        assert S.t_two_sided_p(-t, df) == S.t_two_sided_p(t, df)
    for q in (0.5, 0.6, 0.9, 0.975, 0.995, 0.9999):
        assert S.t_quantile(q, df) == pytest.approx(stats.t.ppf(q, df), rel=1e-9, abs=1e-9)
    for a, b, x in ((df / 2, 0.5, 0.3), (0.5, df / 2, 0.97), (df, df, 0.5), (df + 200, 3, 0.99), (0.1, df, 1e-3)):
        assert S.incomplete_beta(a, b, x) == pytest.approx(special.betainc(a, b, x), rel=1e-9, abs=1e-300)


def test_verdicts_in_words():
    assert S.verdict(0.0035, 0.31, (-0.004, 0.011)) == "within noise (p = 0.31, 95% CI -0.004 to +0.011)"
    assert S.verdict(0.02, 0.001, (0.01, 0.03)) == "better"
    assert S.verdict(-0.02, 0.0001, (-0.03, -0.01)) == "worse"
    assert S.verdict(1.5, 0.2, (-0.52, 3.1), digits=2) == "within noise (p = 0.2, 95% CI -0.52 to +3.10)"


def test_chrf_of_short_references_is_sacrebleus():
    """References shorter than six characters have no n-grams of the higher orders: those orders are left out of
    the average (only orders both sides have count), as sacrebleu leaves them out."""
    hyps = ["the rose doth bloom", "thou art", "a", "summer's lease hath"]
    refs = ["the rose", "thou", "ab", "summer"]
    stats_ = S.chrf_stats(hyps, refs)
    assert S.CHRF.value(stats_.sum(0), len(hyps)) == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score,
                                                                   abs=1e-9)


def test_pooled_groups_of_different_sizes_split_at_the_baselines_runs():
    """Three baseline runs against one candidate: the observed difference is the candidate's accuracy minus the
    mean of the three, and the bootstrap's mean is near it (computed here by hand, run by run)."""
    runs = [two_systems(300, 200 + 10 * k, 0, seed=k)[0] for k in range(4)]
    r = S.pooled(S.ACCURACY, runs[:3], runs[3:], 2000, np.random.default_rng(0))
    accuracy = [float(x.mean()) for x in runs]
    assert r.observed == pytest.approx(accuracy[3] - np.mean(accuracy[:3]))
    idx = np.random.default_rng(0).integers(0, 300, (2000, 300))  # the same draws, by hand
    by_hand = np.mean([x[:, 0][idx].mean(1) for x in runs[3:]], 0) - np.mean([x[:, 0][idx].mean(1) for x in runs[:3]], 0)
    np.testing.assert_allclose(r.boot, by_hand, atol=1e-12)


@pytest.mark.parametrize("boot, p", [
    (np.array([-1.0, 1, 2, 3, 4, 5, 6, 7, 8, 9]), 2 * (1 + 1) / 11),   # one of ten on the far side of 0
    (np.arange(1.0, 11), 2 * 1 / 11),                                  # none: the observed sample alone
    (np.array([-2.0, -1, 0, 1, 2]), 1.0),                              # centred on 0: capped at 1
])
def test_the_bootstrap_p_is_twice_the_far_side_by_hand(boot, p):
    assert S.bootstrap_p(boot) == pytest.approx(p)


def test_a_verdict_needs_p_strictly_below_alpha_and_a_difference():
    """At p = alpha the difference is not significant; just below it is, in the direction of the difference; a
    difference of 0 is never better or worse."""
    assert S.verdict(0.01, 0.05, (0.001, 0.02), alpha=0.05).startswith("within noise (p = 0.05, 95% CI +0.001 to")
    assert S.verdict(0.01, 0.0499, (0.001, 0.02), alpha=0.05) == "better"
    assert S.verdict(-0.01, 0.0499, (-0.02, -0.001), alpha=0.05) == "worse"
    assert S.verdict(0.0, 0.001, (0.0, 0.0), alpha=0.05).startswith("within noise")


def test_the_small_rules_from_both_sides():
    """A null value as far from 0 as the observed one counts (and one just inside does not); a constant
    prediction has r 0, one that varies has its r; two groups with no spread differ for certain or not at all; p
    is written as a number from 0.001 up and as '< 0.001' below; a difference that rounds to 0 has no sign."""
    assert S.permutation_p(0.2, np.array([0.2, -0.2, 0.1999, 0.0])) == pytest.approx(3 / 5)
    assert S.permutation_p(-0.2, np.array([0.3, 0.1])) == pytest.approx(2 / 3)
    gold = np.array([1.0, 2.0, 3.0, 4.0])
    flat = S.pearson_stats(np.full(4, 2.5), gold).sum(0)
    assert float(S.pearson(flat, 4)) == 0.0
    near = np.array([1.0, 2.0, 3.0, 5.0])
    assert float(S.pearson(S.pearson_stats(near, gold).sum(0), 4)) == pytest.approx(np.corrcoef(near, gold)[0, 1])
    assert S.welch(0.5, 0.0, 3, 0.5, 0.0, 3) == (0.0, (0.0, 0.0), 1.0)
    assert S.welch(0.5, 0.0, 3, 0.6, 0.0, 3)[2] == 0.0
    assert (S.format_p(0.001), S.format_p(0.000999), S.format_p(0.0456)) == ("0.001", "< 0.001", "0.046")
    assert (S.signed(-0.0004, 3), S.signed(-0.0006, 3), S.signed(0.0126, 2)) == ("+0.000", "-0.001", "+0.01")
