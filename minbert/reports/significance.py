"""Is B better than A, or is the difference noise? The statistics behind `report.py --compare`.

Every metric compared here (accuracy, Pearson r, chrF) is a function of sums over dev examples of
per-example statistics (accuracy: whether each example is right; Pearson: p, p^2, pg, g, g^2; chrF:
each sonnet's n-gram counts). A resample of the dev set is then a weighted sum, which makes 10,000 of them
a few matrix products:

  - the paired bootstrap (Koehn 2004): draw n examples with replacement, the same draw for both systems,
    and recompute B - A; the 95% interval is the 2.5th and 97.5th percentiles of those differences
    (drawn as scipy.stats.bootstrap(..., paired=True, method="percentile") draws them, so that both give
    the same interval from the same generator);
  - the paired permutation test, or approximate randomisation (Noreen 1989; Riezler and Maxwell 2005): if
    A and B were exchangeable, swapping the two systems' outputs on any example would change nothing, so
    B - A recomputed after random swaps is its null distribution; p = (1 + #{|null| >= |observed|}) /
    (1 + resamples). It fits any metric, Pearson r and chrF included (Dror et al. 2018), and gives p = 1
    for identical systems.

Over seeds: Almost Stochastic Order (del Barrio et al. 2018; Dror et al. 2019; Ulmer et al. 2022)
compares the two score distributions, and `welch` tests two means from their summary statistics (a table
that gives mean, std and the number of seeds). Many comparisons at once: `holm` (Holm 1979). The normal
distribution is the standard library's; Student's t is written here from the incomplete beta function, as
the resampling is our own vectorised numpy (scipy's generic bootstrap and permutation test evaluate the
statistic through Python per batch and per example, far slower on 3,000 examples), so that report.py does
not import scipy.stats (seconds of every start). The tests hold all of it to scipy's answers.
"""
import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Callable

import numpy as np
from sacrebleu.metrics import CHRF as SacrebleuCHRF

CHUNK = 1000  # resamples drawn at a time: 1000 x 3000 indices are 24 MB


# ----------------------------------------------------------------------------- metrics from summed statistics

@dataclass(frozen=True)
class Metric:
    """A corpus metric as a function of summed per-example statistics: `value(sums [..., k], n)`."""
    name: str
    value: Callable
    linear: bool = False  # value is sums / n: a difference of two systems needs only their per-example one


def accuracy_stats(pred, gold):
    """Per example: 1 where the prediction is right."""
    return (np.asarray(pred) == np.asarray(gold)).astype(np.float64)[:, None]


def pearson_stats(pred, gold):
    """Per example: p, p^2, pg, g, g^2, with p and g shifted by the gold scores' mean: r does not change
    with a shift, sums of centred values lose no digits to cancellation, and every system compared on this
    dev set shares the shift, so that an example's outputs can trade places between two systems."""
    p, g = np.asarray(pred, dtype=np.float64), np.asarray(gold, dtype=np.float64)
    p, g = p - g.mean(), g - g.mean()
    return np.stack([p, p * p, p * g, g, g * g], axis=1)


def pearson(sums, n):
    sp, spp, spg, sg, sgg = np.moveaxis(sums, -1, 0)
    cov, vp, vg = n * spg - sp * sg, n * spp - sp * sp, n * sgg - sg * sg
    with np.errstate(invalid="ignore", divide="ignore"):
        r = cov / np.sqrt(vp * vg)
    # a constant prediction has no correlation (evaluation.py); its variance is 0 up to rounding
    varies = (vp > 1e-9 * n * spp) & (vg > 1e-9 * n * sgg)
    return np.where(varies, r, 0.0)


CHRF_ORDER, CHRF_BETA = 6, 2  # sacrebleu's chrF defaults, as the course scores sonnets


def chrf(sums, n):
    """Corpus chrF (Popovic 2015) as sacrebleu computes it from summed statistics: per character n-gram order
    [hypothesis n-grams, reference n-grams, matches]; precision and recall averaged over the orders both
    sides have, then their F-beta, x 100."""
    s = sums.reshape(*sums.shape[:-1], CHRF_ORDER, 3)
    hyp, ref, match = s[..., 0], s[..., 1], s[..., 2]
    both = (hyp > 0) & (ref > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        prec = np.where(both, match / np.where(hyp > 0, hyp, 1), 0).sum(-1)
        rec = np.where(both, match / np.where(ref > 0, ref, 1), 0).sum(-1)
        orders = both.sum(-1)
        prec, rec = prec / np.maximum(orders, 1), rec / np.maximum(orders, 1)
        f = (1 + CHRF_BETA ** 2) * prec * rec / (CHRF_BETA ** 2 * prec + rec)
    return np.where(prec + rec > 0, 100 * f, 0.0)


ACCURACY = Metric("accuracy", lambda sums, n: sums[..., 0] / n, linear=True)
PEARSON = Metric("Pearson r", pearson)
CHRF = Metric("chrF", chrf)


def chrf_stats(hypotheses, references):
    """Per sonnet: sacrebleu's chrF statistics (what its own significance tests resample)."""
    metric = SacrebleuCHRF(char_order=CHRF_ORDER, word_order=0, beta=CHRF_BETA)
    return np.array(metric._extract_corpus_statistics(list(hypotheses), [list(references)]), dtype=np.float64)


# ----------------------------------------------------------------------------- resampling

def bootstrap_indices(n, resamples, rng):
    """Chunks of bootstrap resamples of n examples, each a row of n indices drawn with replacement: the
    draws scipy.stats.bootstrap makes from the same generator (a chunk continues the same stream)."""
    for start in range(0, resamples, CHUNK):
        yield rng.integers(0, n, (min(CHUNK, resamples - start), n))


def resampled_sums(columns, indices):
    """Sums of `columns` [n, k] over each resample of `indices` [m, n]: [m, k]. Few columns are gathered;
    many go through the count of each example in each resample and one matrix product."""
    m, n = indices.shape
    if columns.shape[1] <= 2:
        return np.stack([np.take(columns[:, j], indices).sum(1) for j in range(columns.shape[1])], axis=1)
    flat = indices + (n * np.arange(m))[:, None]
    counts = np.bincount(flat.ravel(), minlength=m * n).reshape(m, n)
    return counts.astype(np.float64) @ columns


def swap_masks(n, resamples, rng):
    """Chunks of random swaps: rows of n zeros and ones, 1 where an example's two outputs trade places
    (random bytes unpacked into bits: eight coin flips per draw)."""
    for start in range(0, resamples, CHUNK):
        m = min(CHUNK, resamples - start)
        bits = np.unpackbits(rng.integers(0, 256, (m, -(-n // 8)), dtype=np.uint8), axis=1)[:, :n]
        yield bits.astype(np.float64)


@dataclass(frozen=True)
class Paired:
    """B - A on one dev set: the observed difference, its bootstrap resamples and its permutation null."""
    observed: float
    boot: np.ndarray
    null: np.ndarray

    def interval(self, level=0.95):
        return tuple(float(x) for x in np.percentile(self.boot, [50 * (1 - level), 50 * (1 + level)]))

    @property
    def p(self):
        return permutation_p(self.observed, self.null)


def permutation_p(observed, null):
    """Two-sided: the share of the null at least as far from 0 as the observed difference, counting the
    observed arrangement itself (so p > 0, and p = 1 when nothing differs)."""
    tol = 1e-9 * max(abs(observed), 1e-12)  # the same difference computed along another path
    return float((1 + np.count_nonzero(np.abs(null) >= abs(observed) - tol)) / (1 + len(null)))


def paired(metric, a, b, resamples, rng):
    """B - A of `metric` on the same dev examples, whose per-example statistics are `a` and `b` [n, k]: the
    observed difference, the paired bootstrap and the permutation null, `resamples` each."""
    n, k = a.shape
    sa, sb = a.sum(0), b.sum(0)
    observed = float(metric.value(sb, n) - metric.value(sa, n))
    delta = b - a
    if metric.linear:  # B - A is the mean of per-example differences: resample those alone
        boot = [resampled_sums(delta, idx)[:, 0] / n for idx in bootstrap_indices(n, resamples, rng)]
    else:
        both = np.concatenate([a, b], axis=1)
        boot = [metric.value(s[:, k:], n) - metric.value(s[:, :k], n)
                for s in (resampled_sums(both, idx) for idx in bootstrap_indices(n, resamples, rng))]
    moving = delta[np.any(delta != 0, axis=1)]  # where both systems give the same, a swap moves nothing
    null = []
    for swaps in swap_masks(len(moving), resamples, rng):
        moved = swaps @ moving  # what the swapped examples move from B's sums to A's
        null.append(metric.value(sb - moved, n) - metric.value(sa + moved, n))
    return Paired(observed, np.concatenate(boot), np.concatenate(null))


def combine(parts):
    """A weighted sum of Paired differences of independent dev sets, resample by resample: the multitask
    mean, (SST + Quora + (r + 1) / 2) / 3, is combine([(1/3, sst), (1/3, quora), (1/6, sts)]); each task's
    examples were resampled (and swapped) within that task."""
    return Paired(sum(w * p.observed for w, p in parts), sum(w * p.boot for w, p in parts),
                  sum(w * p.null for w, p in parts))


def pooled(metric, runs_a, runs_b, resamples, rng):
    """Groups over seeds on one dev set: the mean over B's runs minus the mean over A's, with every run
    resampled on the same bootstrap draw of dev examples (seeds pooled: this sees the dev set's sampling
    noise, not the seeds' spread). Returns a Paired with no permutation null."""
    runs = list(runs_a) + list(runs_b)
    n, k, ra = len(runs[0]), runs[0].shape[1], len(runs_a)
    columns = np.concatenate(runs, axis=1)

    def difference(sums):
        values = metric.value(sums.reshape(*sums.shape[:-1], len(runs), k), n)
        return values[..., ra:].mean(-1) - values[..., :ra].mean(-1)
    boot = [difference(resampled_sums(columns, idx)) for idx in bootstrap_indices(n, resamples, rng)]
    return Paired(float(difference(columns.sum(0))), np.concatenate(boot), np.empty(0))


def bootstrap_p(boot):
    """Two-sided p of a bootstrap distribution of differences: twice the share on the far side of 0 (the
    smallest alpha whose percentile interval leaves 0 out), counting the observed sample itself."""
    below, above = np.count_nonzero(boot <= 0), np.count_nonzero(boot >= 0)
    return float(min(1.0, 2 * (1 + min(below, above)) / (1 + len(boot))))


# ----------------------------------------------------------------------------- seeds

def _steps(n, m):
    """The intervals of (0, 1) on which the quantile functions of n and of m scores are both constant:
    their widths and the index of the score each function takes there."""
    cuts = np.union1d(np.arange(n + 1) * m, np.arange(m + 1) * n)  # t = i/n and j/m, as integers over n*m
    width = np.diff(cuts) / (n * m)
    mid = (cuts[:-1] + cuts[1:]) / 2  # on (cut, next cut), F^-1(t) is the score of rank floor(t * n)
    return width, np.minimum(mid // m, n - 1).astype(int), np.minimum(mid // n, m - 1).astype(int)


def violation_ratio(better, worse):
    """epsilon_W2 (del Barrio et al. 2018): the share of the squared Wasserstein distance between the two
    empirical score distributions where `better`'s quantile function lies below `worse`'s, integrated
    exactly over the quantile functions' steps. 0: `better` is above everywhere; 0.5: no order (or the
    same distribution). Rows of 2-D inputs are separate pairs of samples."""
    a, b = np.sort(better, axis=-1), np.sort(worse, axis=-1)
    width, ia, ib = _steps(a.shape[-1], b.shape[-1])
    qa, qb = a[..., ia], b[..., ib]
    d2 = (qb - qa) ** 2 * width
    total, violated = d2.sum(-1), np.where(qa < qb, d2, 0).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(total > 0, violated / total, 0.5)


def aso(better, worse, alpha=0.05, resamples=1000, rng=None, draws=None):
    """epsilon_min of Almost Stochastic Order (Dror et al. 2019, eq. 7; Ulmer et al. 2022): an upper bound,
    at confidence 1 - alpha, on how far `better`'s scores are from being stochastically larger than
    `worse`'s. Below 0.5 `better` is ahead more often than not; Ulmer et al. recommend claiming it only
    below 0.2. sigma comes from `resamples` bootstrap replicates of both samples (`draws`: their uniform
    draws, [resamples, n] and [resamples, m], mapped to scores through the quantile functions; by default
    from `rng`). Several comparisons at once: pass alpha / their number (Bonferroni)."""
    a, b = np.sort(np.asarray(better, dtype=np.float64)), np.sort(np.asarray(worse, dtype=np.float64))
    n, m = len(a), len(b)
    if draws is None:
        draws = (rng.random((resamples, n)), rng.random((resamples, m)))
    ua, ub = draws
    rep_a = a[np.clip(np.ceil(n * ua).astype(int) - 1, 0, n - 1)]  # the quantile function at each draw
    rep_b = b[np.clip(np.ceil(m * ub).astype(int) - 1, 0, m - 1)]
    eps = float(violation_ratio(a, b))
    scale = math.sqrt(n * m / (n + m))
    sigma = float(np.std(scale * (violation_ratio(rep_a, rep_b) - eps)))
    return float(np.clip(eps - sigma / scale * NormalDist().inv_cdf(alpha), 0.0, 1.0))


def welch(mean_a, std_a, n_a, mean_b, std_b, n_b, level=0.95):
    """B - A from two groups' means, sample standard deviations and sizes (Welch's t-test, unequal
    variances): (difference, (low, high) at `level`, two-sided p)."""
    va, vb = std_a ** 2 / n_a, std_b ** 2 / n_b
    se = math.sqrt(va + vb)
    diff = mean_b - mean_a
    if se == 0:
        return diff, (diff, diff), 1.0 if diff == 0 else 0.0
    df = (va + vb) ** 2 / (va ** 2 / (n_a - 1) + vb ** 2 / (n_b - 1))  # Welch-Satterthwaite
    half = t_quantile(0.5 + level / 2, df) * se
    return diff, (diff - half, diff + half), t_two_sided_p(diff / se, df)


def incomplete_beta(a, b, x):
    """I_x(a, b), the regularised incomplete beta function: its continued fraction (DLMF 8.17.22), evaluated
    by the modified Lentz method where it converges fast, x < (a + 1) / (a + b + 2), and through
    I_x(a, b) = 1 - I_(1-x)(b, a) elsewhere."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - incomplete_beta(b, a, 1.0 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    tiny, f, c, d = 1e-300, 1.0, 1.0, 0.0
    for i in range(1000):
        m = i // 2
        if i == 0:
            num = 1.0
        elif i % 2:  # the odd terms d_(2m+1)
            num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        else:  # the even terms d_(2m)
            num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        d = 1.0 + num * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + num / c
        c = c if abs(c) > tiny else tiny
        f *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return front * (f - 1.0) / a


def t_two_sided_p(t, df):
    """P(|T| >= |t|) for Student's t with `df` degrees of freedom (any df > 0, Welch's fractional ones too):
    I_(df / (df + t^2))(df / 2, 1 / 2)."""
    return incomplete_beta(df / 2, 0.5, df / (df + t * t)) if math.isfinite(t) else 0.0


def t_quantile(q, df):
    """The t with P(T <= t) = q for Student's t with `df` degrees of freedom (0.5 <= q < 1), by bisection on
    t_two_sided_p: to within 1e-12 of the exact quantile."""
    target = 2.0 * (1.0 - q)  # the two-sided p at the quantile
    if target >= 1.0:
        return 0.0
    low, high = 0.0, 1.0
    while t_two_sided_p(high, df) > target:
        low, high = high, 2.0 * high
    while high - low > 1e-12 * max(1.0, high):
        mid = (low + high) / 2
        low, high = (mid, high) if t_two_sided_p(mid, df) > target else (low, mid)
    return (low + high) / 2


def seeds_needed(diff, std, alpha=0.05, power=0.8):
    """Seeds per side for a two-sided test at `alpha` to find a true difference `diff` with probability
    `power` when each seed's score spreads by `std` (the normal approximation, n = 2 ((z_a + z_b) std /
    diff)^2, and at least 3, what ASO needs). None when there is no spread or no difference to go on."""
    if not std > 0 or diff == 0:
        return None
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    return max(3, math.ceil(2 * (z * std / diff) ** 2))


# ----------------------------------------------------------------------------- many comparisons, in words

def holm(pvalues):
    """Holm-Bonferroni (Holm 1979) adjusted p-values, in the given order: the i-th smallest of m is
    multiplied by m - i + 1, then each kept at least as large as the one before it, capped at 1."""
    p = np.asarray(pvalues, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    adjusted = np.maximum.accumulate(np.minimum(1.0, p[order] * (len(p) - np.arange(len(p)))))
    out = np.empty_like(p)
    out[order] = adjusted
    return [float(x) for x in out]


def signed(x, digits):
    return f"{round(x, digits) or 0.0:+.{digits}f}"  # no "-0.000" for a difference that rounds to 0


def format_p(p):
    return f"{p:.2g}" if p >= 0.001 else "< 0.001"


def verdict(diff, p, interval, alpha=0.05, digits=3):
    """'better', 'worse' or 'within noise (p = 0.31, 95% CI -0.004 to +0.011)'."""
    if p < alpha and diff != 0:
        return "better" if diff > 0 else "worse"
    p_text = f"p {format_p(p)}" if p < 0.001 else f"p = {format_p(p)}"
    return (f"within noise ({p_text}, 95% CI {signed(interval[0], digits)} to "
            f"{signed(interval[1], digits)})")
