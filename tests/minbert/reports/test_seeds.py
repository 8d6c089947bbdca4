"""reports/seeds.py on tiny run folders: groups over seeds give mean ± std, ASO where each side has 3 seeds and the
seeds needed where not, beside the pooled bootstrap; groups mixing configurations or seeds, or one run a side, are
one line; Part 1 groups are held against the handout's published means from summary statistics."""
import numpy as np
import pytest

from minbert.reports.compare import CompareSettings
from minbert.reports.seeds import compare_groups, compare_handout
from tests.course import COMPARED_GOLD, COMPARED_IDS, COMPARED_N, make_compared_run, make_part2_run, mark_run
from utils import MinbertError


def groups(tmp_path, skills, name, seeds, **flags):
    return tuple(str(make_part2_run(tmp_path / f"{name}-{s}", skills, s, {"lr": flags.get("lr", 1e-4)})) for s in seeds)


def test_groups_over_seeds_give_aso_with_three_seeds_and_the_seeds_needed_below(tmp_path, capsys):
    base = groups(tmp_path, 0.6, "base", (1, 2, 3))
    better = groups(tmp_path, 0.75, "rd", (1, 2, 3), lr=2e-4)
    few = groups(tmp_path, 0.62, "sm", (1, 2), lr=3e-4)
    rows = compare_groups(CompareSettings(baseline=base, candidates=(better, few), resamples=1000))
    assert [(r.candidate, r.task) for r in rows] == [(c, t) for c in ("rd-*", "sm-*")
                                                     for t in ("sst", "quora", "sts", "mean")]
    for r in rows[:4]:
        assert r.seeds.startswith("ASO ε_min 0.00 (B over A)") and r.verdict == "better"
        assert r.a.endswith("(3 seeds)") and " ± " in r.a
    for r in rows[4:]:
        assert r.seeds.startswith("ASO needs ≥ 3 seeds per side: about ")
        assert r.verdict.startswith("untested over seeds; dev set: ")
    sst = rows[0]
    assert float(sst.b.split()[0]) - float(sst.a.split()[0]) == pytest.approx(sst.diff, abs=2e-3)


def test_groups_that_mix_configurations_or_seeds_or_hold_one_run_each_are_refused(tmp_path):
    base = groups(tmp_path, 0.6, "base", (1, 2, 3))
    mixed = (str(make_part2_run(tmp_path / "x-1", 0.7, 1, {"lr": 2e-4})), str(make_part2_run(tmp_path / "x-2", 0.7, 2,
                                                                                     {"lr": 3e-4})))
    with pytest.raises(MinbertError, match=r"--candidate: .*x-1 and .*x-2 differ beyond the seed \(--lr 0.0002 "
                                           r"against 0.0003\): a group over seeds repeats one configuration"):
        compare_groups(CompareSettings(baseline=base, candidates=(mixed,), resamples=100))
    twice = (str(make_part2_run(tmp_path / "y-1", 0.7, 1)), str(make_part2_run(tmp_path / "y-1b", 0.7, 1)))
    with pytest.raises(MinbertError, match=r"--candidate: .*y-1 and .*y-1b both ran seed 1: a group over seeds "
                                           "takes each seed once"):
        compare_groups(CompareSettings(baseline=base, candidates=(twice,), resamples=100))
    with pytest.raises(MinbertError, match=r"--baseline and --candidate name one run each: a seed-level comparison "
                                           r"needs at least 2 seeds per side \(3 for ASO\)"):
        compare_groups(CompareSettings(baseline=base[:1], candidates=(twice[:1],), resamples=100))


def test_a_group_may_pretrain_each_seed_afresh_but_not_with_another_configuration(tmp_path):
    """Part 2 runs fine-tuned from checkpoints that pretrain.py wrote with one configuration, one per seed,
    form one group; a checkpoint pretrained with another configuration does not."""
    def pretrained(name, seed, **flags):
        folder = tmp_path / name
        mark_run(folder, "pretrain", {"lr": 1e-4, "nsp": 0.0, "seed": seed, **flags}, stem="pretrain")
        return {"--pretrained weights": {"path": str(folder / "model.safetensors"), "sha256": name}}

    def run(name, seed, inputs):
        return str(make_part2_run(tmp_path / name, 0.7, seed, {"inputs": inputs}))
    base = groups(tmp_path, 0.6, "base", (1, 2, 3))
    afresh = tuple(run(f"p-{s}", s, pretrained(f"pre-{s}", s)) for s in (1, 2, 3))
    rows = compare_groups(CompareSettings(baseline=base, candidates=(afresh,), resamples=100))
    assert rows
    other = (afresh[0], run("q-2", 2, pretrained("pre-nsp-2", 2, nsp=1.0)))
    with pytest.raises(MinbertError, match=r"differ beyond the seed \(--pretrained weights: other contents\)"):
        compare_groups(CompareSettings(baseline=base, candidates=(other,), resamples=100))


def test_part1_groups_against_the_handouts_published_means(tmp_path, capsys):
    runs = []
    for s, acc in ((1, 0.52), (2, 0.53), (3, 0.51)):
        gold = COMPARED_GOLD["sst"]
        pred = np.where(np.arange(COMPARED_N) < acc * COMPARED_N, gold, (gold + 1) % 5)
        runs.append(str(make_compared_run(tmp_path / f"p1-{s}", {"sst": (COMPARED_IDS, gold, pred)},
                                          {"fine_tune_mode": "full-model", "seed": s,
                                           "pretrained": "all-minilm-l6-v2"}, "classifier")))
    rows = compare_handout(CompareSettings(handout=True, candidates=(tuple(runs),)))
    (row,) = rows
    assert row.a == "0.515 ± 0.004 (10 seeds)" and row.b == "0.520 ± 0.010 (3 seeds)"
    assert row.diff == pytest.approx(0.005)
    assert 0.4 < row.p < 0.6 and row.verdict.startswith("within noise (p = ")
    out = capsys.readouterr().out
    assert "the handout's figures are bert-base-uncased's; p1-* fine-tuned all-minilm-l6-v2" in out
    assert f"note: p1-* was scored on {COMPARED_N} SST dev examples, the handout's figures on the course's 1101" in out
    with pytest.raises(MinbertError, match=r"--handout: --candidate p1-1 is one run: its spread over seeds is unknown"):
        compare_handout(CompareSettings(handout=True, candidates=(tuple(runs[:1]),)))
    same = []
    for s in (4, 5):  # two runs scoring alike: no spread of theirs, which Welch's test would take as certainty
        gold = COMPARED_GOLD["sst"]
        pred = np.where(np.arange(COMPARED_N) < 0.5 * COMPARED_N, gold, (gold + 1) % 5)
        same.append(str(make_compared_run(tmp_path / f"eq-{s}", {"sst": (COMPARED_IDS, gold, pred)},
                                          {"fine_tune_mode": "full-model", "seed": s,
                                           "pretrained": "all-minilm-l6-v2"}, "classifier")))
    with pytest.raises(MinbertError, match=r"--handout: --candidate eq-\*'s 2 runs all score 0.5000 on SST dev: no "
                                           r"spread over seeds .* give runs of different seeds"):
        compare_handout(CompareSettings(handout=True, candidates=(tuple(same),)))


def test_aso_runs_at_alpha_over_every_row_and_the_spread_has_two_means_estimated(tmp_path, monkeypatch):
    """ASO's confidence is Bonferroni's over all rows, the multitask mean's included (4 a candidate of Part 2: 8
    for two); below 3 seeds the spread quoted is the pooled std of both groups about their own means (ddof 2)."""
    from minbert.reports import seeds
    alphas = []
    real = seeds.aso
    monkeypatch.setattr(seeds, "aso", lambda a, b, alpha, *rest: alphas.append(alpha) or real(a, b, alpha, *rest))
    base = groups(tmp_path, 0.6, "base", (1, 2, 3))
    better = groups(tmp_path, 0.75, "rd", (1, 2, 3), lr=2e-4)
    also = groups(tmp_path, 0.7, "sm", (1, 2, 3), lr=3e-4)
    compare_groups(CompareSettings(baseline=base, candidates=(better, also), resamples=200, alpha=0.05))
    assert alphas and all(a == pytest.approx(0.05 / 8) for a in alphas)
    few = groups(tmp_path, 0.62, "fw", (1, 2), lr=4e-4)
    rows = compare_groups(CompareSettings(baseline=base[:2], candidates=(few,), resamples=200))
    from minbert.reports.dev_outputs import read_run
    a = np.array([read_run(f).tasks["sst"].value for f in base[:2]])
    b = np.array([read_run(f).tasks["sst"].value for f in few])
    spread = np.sqrt((((a - a.mean()) ** 2).sum() + ((b - b.mean()) ** 2).sum()) / (len(a) + len(b) - 2))
    assert f"(std {spread:.3f})" in rows[0].seeds


def test_a_task_only_some_runs_kept_is_left_out_of_the_group(tmp_path, capsys):
    base = groups(tmp_path, 0.6, "base", (1, 2, 3))
    partial = (str(make_part2_run(tmp_path / "p-1", 0.7, 1, {"lr": 2e-4})),
               str(make_part2_run(tmp_path / "p-2", 0.7, 2, {"lr": 2e-4}, tasks=("sst", "quora"))),
               str(make_part2_run(tmp_path / "p-3", 0.7, 3, {"lr": 2e-4})))
    rows = compare_groups(CompareSettings(baseline=base, candidates=(partial,), resamples=200))
    assert [r.task for r in rows] == ["sst", "quora"]
    assert ("note: p-* against base-*: not compared: STS (no dev outputs in 1 of 3 runs of p-*)"
            in capsys.readouterr().out)
    # groups that trained different tasks: said so, not blamed on runs that kept nothing
    two = tuple(str(make_part2_run(tmp_path / f"q-{i}", 0.7, i, {"lr": 3e-4}, tasks=("sst", "quora")))
                for i in (1, 2, 3))
    compare_groups(CompareSettings(baseline=base, candidates=(two,), resamples=200))
    assert "note: q-* against base-*: not compared: STS (only base-* has it)" in capsys.readouterr().out


def test_the_handout_comparison_is_welchs_test_from_the_sample_std(tmp_path):
    """B - A against the handout's mean ± std over 10 seeds: Welch's interval and p from the candidate's mean and
    sample standard deviation (ddof 1), as scipy computes them."""
    from scipy import stats
    runs, accs = [], (0.52, 0.53, 0.505)
    for s, acc in zip((1, 2, 3), accs):
        gold = COMPARED_GOLD["sst"]
        pred = np.where(np.arange(COMPARED_N) < acc * COMPARED_N, gold, (gold + 1) % 5)
        runs.append(str(make_compared_run(tmp_path / f"h-{s}", {"sst": (COMPARED_IDS, gold, pred)},
                                          {"fine_tune_mode": "full-model", "seed": s, "pretrained": "bert-base-uncased"},
                                          "classifier")))
    (row,) = compare_handout(CompareSettings(handout=True, candidates=(tuple(runs),)))
    b = np.array([round(a * COMPARED_N) / COMPARED_N for a in accs])
    t = stats.ttest_ind_from_stats(b.mean(), b.std(ddof=1), 3, 0.515, 0.004, 10, equal_var=False)
    assert row.p == pytest.approx(t.pvalue, rel=1e-9)
    va, vb = 0.004 ** 2 / 10, b.var(ddof=1) / 3
    df = (va + vb) ** 2 / (va ** 2 / 9 + vb ** 2 / 2)
    half = stats.t.ppf(0.975, df) * np.sqrt(va + vb)
    assert row.interval == pytest.approx((b.mean() - 0.515 - half, b.mean() - 0.515 + half), rel=1e-9)


def test_runs_that_record_no_flags_are_named_in_one_warning(tmp_path, capsys):
    """A group whose runs record no flags (an ensemble's folders, runs of an earlier minbert) is compared all
    the same, one line naming the runs whose configuration could not be checked."""
    base = groups(tmp_path, 0.6, "base", (1, 2, 3))
    bare = tuple(str(make_compared_run(tmp_path / f"bare-{s}", {t: (COMPARED_IDS, COMPARED_GOLD[t], COMPARED_GOLD[t])
                                                                for t in ("sst", "quora", "sts")})) for s in (1, 2))
    flagged = str(make_part2_run(tmp_path / "flagged-1", 0.7, 1))
    compare_groups(CompareSettings(baseline=base, candidates=(bare + (flagged,),), resamples=100))
    out = capsys.readouterr().out
    assert out.count("warning:") == 1
    assert (f"warning: --candidate: {bare[0]}, {bare[1]} record no flags (an ensemble's folder, or a run of an "
            "earlier minbert), so their configurations cannot be checked against the group's") in out


def test_a_run_in_two_groups_is_refused(tmp_path):
    base = groups(tmp_path, 0.6, "base", (1, 2, 3))
    with pytest.raises(MinbertError, match=r"--candidate: .*base-1 is in --baseline base-\* too: each run belongs to "
                                           r"one group"):
        compare_groups(CompareSettings(baseline=base, candidates=(base,), resamples=100))
    other = groups(tmp_path, 0.7, "b", (1, 2), lr=2e-4)
    with pytest.raises(MinbertError, match=r"--candidate: .*b-1 is in --candidate b-\* too"):
        compare_groups(CompareSettings(baseline=base, candidates=(other, other[:1] + (base[2],)), resamples=100))
