"""scoring.py: --score counts and reports bad ids, names a non-numeric prediction's line, leaves unlabelled rows
unscored, reads the course's header; Pearson of constant predictions is 0; a Quora logit above 0 (P > 0.5) is a
paraphrase; macro F1 is scikit-learn's."""
import re

import numpy as np
import pytest

from minbert.cli import MinbertError
from minbert.scoring import (macro_f1, multitask_mean, pearson, read_predictions, score_file, to_predictions,
                             write_predictions)
from tests.processes import run_main


def _gold(tmp_path):
    p = tmp_path / "ids-sst-dev.csv"
    p.write_text("\tid\tsentence\tsentiment\n0\ta1\t x .\t1\n1\ta2\t y .\t2\n2\ta3\t z .\t3\n3\ta4\t w .\t4\n")
    return p


def test_score_counts_and_reports_bad_ids(tmp_path):
    gold = _gold(tmp_path)
    pred = tmp_path / "pred.csv"
    pred.write_text("id , Predicted_Sentiment\na1 , 1\na2 , 0\na2 , 2\nzz , 3\na3 , 3\n")
    r = score_file(pred, gold)
    assert r["accuracy"] == pytest.approx(2 / 3) and r["n"] == 3
    assert r["missing"] == ["a4"] and r["duplicated"] == ["a2"] and r["unknown"] == ["zz"]
    out = run_main("evaluation.py", "--score", str(pred), str(gold))
    # no partial score printed: one line says what is wrong with the file
    assert out.returncode == 2 and "accuracy" not in out.stdout and len(out.stderr.strip().splitlines()) == 1
    assert "not scored" in out.stderr and "1 missing id(s) (a4)" in out.stderr and "1 unknown id(s) (zz)" in out.stderr


def test_score_names_the_line_and_id_of_a_non_numeric_prediction(tmp_path):
    gold = _gold(tmp_path)
    pred = tmp_path / "pred.csv"
    pred.write_text("id , Predicted_Sentiment\na1 , 1\na2 , two\n")
    out = run_main("evaluation.py", "--score", str(pred), str(gold))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "pred.csv: line 3 (id a2): prediction 'two' is not a number" in out.stderr


def test_a_form_feed_or_line_separator_does_not_shift_the_line_named(tmp_path):
    """Lines end at \\n only, so a stray \\f or U+2028 in a prediction file leaves every line its number."""
    from evaluation import read_predictions
    pred = tmp_path / "pred.csv"
    for char in ("\f", "\u2028"):
        pred.write_text(f"id , Predicted_Sentiment\na1 , 1{char}\na2 , two\n")
        with pytest.raises(MinbertError, match=r"pred.csv: line 3 \(id a2\): prediction 'two' is not a number"):
            read_predictions(pred)


def test_unlabelled_gold_rows_are_predicted_but_not_scored(tmp_path):
    """The course's quora-dev.csv has a row broken by a quote: it needs a prediction, it has no label."""
    gold = tmp_path / "quora-dev.csv"
    gold.write_text("id\tsentence1\tsentence2\tis_duplicate\nq1\ta\tb\t1.0\nq2\tc\td\t0.0\n"
                    'q3\t"broken quote\t\t\n')
    pred = tmp_path / "para-dev-output.csv"
    write_predictions(pred, "quora", ["q1", "q2", "q3"], [1, 1, 0])
    r = score_file(pred, gold)
    assert r["n"] == 2 and r["accuracy"] == 0.5 and not r["missing"]
    write_predictions(pred, "quora", ["q1", "q2"], [1, 0])
    assert score_file(pred, gold)["missing"] == ["q3"]


def test_scoring_against_a_test_file_says_it_has_no_labels(tmp_path, course_data):
    pred = tmp_path / "pred.csv"
    pred.write_text("id , Predicted_Sentiment\na1 , 1\n")
    out = run_main("evaluation.py", "--score", str(pred), str(course_data / "ids-sst-test-student.csv"))
    assert out.returncode == 2 and out.stderr.strip() == (
        f"error: {course_data / 'ids-sst-test-student.csv'}: no sentiment column, so no labels to score against (a "
        "test file has none): give the labelled dev or train file of sst")
    out = run_main("evaluation.py", "--score", str(pred), str(tmp_path / "ids-sst-dev.csv"))
    assert out.returncode == 2 and "ids-sst-dev.csv: labelled CSV (the gold file) not found" in out.stderr


def test_score_accepts_the_course_header_and_sts(tmp_path):
    gold = tmp_path / "sts-dev.csv"
    gold.write_text("id\tsentence1\tsentence2\tsimilarity\ns1\ta\tb\t1.0\ns2\tc\td\t3.0\ns3\te\tf\t5.0\n")
    pred = tmp_path / "sts-dev-output.csv"
    write_predictions(pred, "sts", ["s1", "s2", "s3"], [0.5, 2.0, 4.9])
    assert pred.read_text().splitlines()[0] == "id , Predicted_Similarity"
    r = score_file(pred, gold)
    assert r["metric"] == "pearson" and r["pearson"] == pytest.approx(np.corrcoef([0.5, 2, 4.9], [1, 3, 5])[0, 1], abs=1e-4)
    pred.write_text("id \t Predicted_Similarity \ns1 , 1\ns2 , 3\ns3 , 5\n")
    assert score_file(pred, gold)["pearson"] == pytest.approx(1.0)


def test_pearson_of_constant_predictions_is_zero_in_training_and_undefined_when_a_file_is_scored(tmp_path):
    """A model's dev r (a run's log, its best epoch) counts constant predictions as no correlation; scoring a
    file says that r is undefined there, and why, instead of printing 0."""
    assert pearson([1, 1, 1], [1, 2, 3]) == 0.0
    gold = tmp_path / "sts-dev.csv"
    gold.write_text("id\tsentence1\tsentence2\tsimilarity\ns1\ta\tb\t1.0\ns2\tc\td\t3.0\ns3\te\tf\t5.0\n")
    pred = write_predictions(tmp_path / "sts-dev-output.csv", "sts", ["s1", "s2", "s3"], [2.5, 2.5, 2.5])
    r = score_file(pred, gold)
    assert np.isnan(r["pearson"]) and r["undefined"] == "every prediction is 2.5, so there is no correlation to measure"
    out = run_main("evaluation.py", "--score", str(pred), str(gold))
    assert out.returncode == 0 and out.stdout.strip() == ("sts pearson: undefined (every prediction is 2.5, so there "
                                                          "is no correlation to measure) over 3 ids")


@pytest.mark.parametrize("task, value, problem", [
    ("sts", "nan", "is outside STS's similarity range, 0 to 5"), ("sts", "inf", "is outside STS's similarity range"),
    ("sts", "1e308", "is outside STS's similarity range"), ("sts", "-0.01", "is outside STS's similarity range"),
    ("sst", "9", "is not one of SST's classes, 0 to 4"), ("sst", "-1", "is not one of SST's classes"),
    ("sst", "2.5", "is not one of SST's classes"), ("quora", "2", "is not one of QUORA's classes, 0 to 1")])
def test_a_prediction_outside_the_tasks_values_is_refused_naming_its_line(tmp_path, task, value, problem):
    """Each boundary from both sides: 0 and 5 are STS similarities, 4 an SST class, 1 a Quora one."""
    header = {"sts": "Predicted_Similarity", "sst": "Predicted_Sentiment", "quora": "Predicted_Is_Paraphrase"}[task]
    last = {"sts": "5", "sst": "4", "quora": "1"}[task]
    pred = tmp_path / "p.csv"
    pred.write_text(f"id , {header}\na , 0\nb , {last}\n")
    assert read_predictions(pred, task)[0] == {"a": 0.0, "b": float(last)}
    pred.write_text(f"id , {header}\na , 0\nb , {value}\n")
    with pytest.raises(MinbertError, match=rf"p.csv: line 3 \(id b\): prediction '{re.escape(value)}' "
                                           rf"{re.escape(problem)}"):
        read_predictions(pred, task)
    assert read_predictions(pred)[0]["b"] == float(value) or value == "nan"  # without a task: read as it is


def test_quora_decides_at_probability_one_half():
    logits = np.array([-0.3, -0.01, 0.01, 0.3, 2.0])  # P(paraphrase) 0.43, 0.497, 0.503, 0.57, 0.88
    assert to_predictions("quora", logits).tolist() == [0, 0, 1, 1, 1]
    assert to_predictions("sst", np.array([[0.1, 2.0, 0.3, 0, 0], [0, 0, 0, 0, 0.2]])).tolist() == [1, 4]


def test_the_multitask_mean_puts_sts_r_on_0_to_1():
    assert multitask_mean({"sst": 0.5, "quora": 0.8, "sts": 0.6}) == pytest.approx((0.5 + 0.8 + 0.8) / 3)


def test_macro_f1_averages_the_classes_alike():
    gold, pred = [0, 0, 0, 1, 2], [0, 0, 0, 0, 0]  # accuracy 0.6; F1 0.75 for class 0, 0 for the two others
    assert macro_f1(pred, gold) == pytest.approx(0.25)


def test_macro_f1_is_scikit_learns():
    from sklearn.metrics import f1_score
    rng = np.random.default_rng(0)
    for n, k in [(1, 2), (5, 5), (40, 2), (300, 5), (17, 7)]:
        gold, pred = rng.integers(0, k, n), rng.integers(0, k, n)
        pred[: n // 3] = gold[: n // 3]
        assert macro_f1(pred, gold) == pytest.approx(f1_score(gold, pred, average="macro"), abs=1e-12)
    assert macro_f1([3, 3], [1, 1]) == pytest.approx(f1_score([1, 1], [3, 3], average="macro", zero_division=0))
