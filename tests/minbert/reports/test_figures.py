"""reports/figures.py: the numbers in the figures are the ones a hand count, minbert/scoring.py or scikit-learn
gives; the comparison's figure has a row per comparison."""
import warnings

import numpy as np
import pytest

from minbert.reports.figures import (DPI, plot_confusion, plot_differences, plot_quora, plot_sts, precision_recall,
                                     worst_examples)
from minbert.scoring import pearson
from minbert.reports.read import load_scores
from minbert.reports.verdicts import NAMES, Row, judge
from tests.course import make_multitask_run, png_size


def test_confusion_counts_equal_a_hand_count(tmp_path):
    run, truth = make_multitask_run(tmp_path / "r")
    gold, pred = truth["sst"]
    hand = np.zeros((5, 5), dtype=int)
    for g, p in zip(gold, pred):
        hand[g][p] += 1
    _, m = plot_confusion(load_scores(run / "sst-dev-scores.npz"), "r", "sst", tmp_path / "c.png")
    assert (m == hand).all() and m.sum() == len(gold)


def test_scatter_r_is_evaluations_pearson(tmp_path):
    run, truth = make_multitask_run(tmp_path / "r")
    gold, pred = truth["sts"]
    _, stats = plot_sts(load_scores(run / "sts-dev-scores.npz"), "r", tmp_path / "s.png")
    assert stats["pearson"] == pytest.approx(pearson(pred, gold), abs=1e-6)


def test_quora_leaves_unlabelled_rows_out(tmp_path):
    from sklearn.metrics import f1_score  # here, as in the next test: its import is a second of every collection
    run, _ = make_multitask_run(tmp_path / "r")
    s = load_scores(run / "para-dev-scores.npz")
    assert np.isnan(s["gold"][3]) and len(s["ids"]) == 40
    _, stats = plot_quora(s, "r", tmp_path / "q.png")
    keep = ~np.isnan(s["gold"])
    assert stats["accuracy"] == pytest.approx(np.mean((s["output"][keep] > 0) == s["gold"][keep]))
    assert stats["f1"] == pytest.approx(f1_score(s["gold"][keep], s["output"][keep] > 0))


@pytest.mark.parametrize("seed", range(4))
def test_the_precision_recall_curve_is_scikit_learns(seed):
    """Against scikit-learn's, on scores with ties (rounded), and on gold with no positive at all."""
    from sklearn.metrics import precision_recall_curve
    rng = np.random.default_rng(seed)
    gold = rng.integers(0, 2, 60) if seed else np.zeros(60, dtype=int)
    score = np.round(rng.random(60) + 0.3 * gold, 1)
    precision, recall = precision_recall(gold, score)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-learn's warning that no positive class is found (seed 0)
        expected_p, expected_r, _ = precision_recall_curve(gold, score)
    np.testing.assert_allclose(precision, expected_p)
    np.testing.assert_allclose(recall, expected_r)


def test_the_differences_figure_has_a_row_per_comparison(tmp_path):
    rows = judge([Row(t, "a", c, "", "", d, (d - 0.01, d + 0.01), p) for t in ("sst", "mean")
                  for c, d, p in (("b", 0.02, 0.001), ("c", -0.001, 0.6))], 0.05)
    path = plot_differences(rows, NAMES, tmp_path / "d.png", "two candidates against a")
    assert png_size(path) == (int(7.5 * DPI), int((1.0 + 0.45 * 4) * DPI))


def test_the_most_wrong_examples_are_wrong_ones_the_most_confident_first():
    """Quora: of four, two predicted wrong: those two, the more confident first, and no right one however unsure
    (p 0.50); SST with every example right: none; STS: the largest errors, every example eligible."""
    def scores(gold, output, pred):
        n = len(gold)
        return {"gold": np.array(gold, dtype=float), "output": np.array(output), "pred": np.array(pred),
                "ids": np.array([f"i{k}" for k in range(n)]), "text1": np.array([f"t{k}" for k in range(n)]),
                "text2": np.array([""] * n)}
    quora = worst_examples(scores([1, 0, 1, 0, 1], [0.01, 3.0, -2.0, -1.0, 5.0], [1, 1, 0, 0, 1]), "quora")
    assert [e["id"] for e in quora] == ["i1", "i2"]
    assert quora[0]["predicted"] == "1 (p=0.95)" and quora[0]["error"] == pytest.approx(1 / (1 + np.exp(-3.0)))
    logits = np.eye(5)[[0, 3, 4]] * 2.0
    assert worst_examples(scores([0, 3, 4], logits, [0, 3, 4]), "sst") == []
    sts = worst_examples(scores([1.0, 4.0, 2.5], [1.5, 1.0, 2.4], [1.5, 1.0, 2.4]), "sts", k=2)
    assert [(e["id"], e["error"]) for e in sts] == [("i1", pytest.approx(3.0)), ("i0", pytest.approx(0.5))]
