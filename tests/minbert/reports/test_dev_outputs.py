"""reports/dev_outputs.py: a run's dev outputs read from its dev-scores files, from its prediction files (scored
against the course's dev CSVs) or from its sonnets (chrF), each giving the score the run itself reported; two
runs on other dev sets, NaN predictions, a missing or damaged folder are refused in one line."""
import json
import shutil

import numpy as np
import pytest
import sacrebleu

from evaluation import accuracy, pearson, write_predictions
from minbert.course_data import data_file, read_examples, read_sonnets
from minbert.reports.dev_outputs import aligned, read_run
from tests.course import make_compared_run, make_multitask_run, real_data_folder
from utils import MinbertError


def test_a_part2_run_is_read_from_its_dev_scores_with_the_scores_it_reported(tmp_path):
    folder, truth = make_multitask_run(tmp_path / "run")
    run = read_run(folder)
    assert list(run.tasks) == ["sst", "quora", "sts"]
    gold, pred = truth["sst"]
    assert run.tasks["sst"].value == pytest.approx(accuracy(pred, gold))
    gold, pred = truth["sts"]
    assert run.tasks["sts"].value == pytest.approx(pearson(pred, gold))
    assert len(run.tasks["quora"].ids) == 39  # the unlabelled row is predicted, not scored
    assert run.flags() is None  # no checkpoint in the folder


def test_an_ensembles_prediction_files_are_scored_against_the_dev_csvs(tmp_path, course_data):
    folder = tmp_path / "ens"
    folder.mkdir()
    sts = read_examples(course_data / "sts-dev.csv", "sts", "dev")
    # an ensemble's files average similarities, each within 0-5
    pred = [3.0 if e.label is None else min(5.0, max(0.0, e.label + (0.5 if i % 2 else -0.5)))
            for i, e in enumerate(sts)]
    write_predictions(folder / "sts-dev-output.csv", "sts", [e.id for e in sts], pred)
    run = read_run(folder, course_data)
    keep = [i for i, e in enumerate(sts) if e.label is not None]
    assert list(run.tasks) == ["sts"]
    assert run.tasks["sts"].value == pytest.approx(pearson([round(pred[i], 4) for i in keep],
                                                           [sts[i].label for i in keep]))
    # the labels as a model's dev-scores file keeps them, in float32
    labels = [np.float32(e.label) if e.label is not None else np.nan for e in sts]
    scores = read_run(make_compared_run(tmp_path / "run", {"sts": ([e.id for e in sts], labels, pred)})).tasks["sts"]
    assert aligned(scores, run.tasks["sts"]).stats.shape == run.tasks["sts"].stats.shape  # the same dev set
    with pytest.raises(MinbertError, match=r"sts-dev-output.csv: a prediction file without the run's raw dev "
                                           r"outputs; scoring it needs the course's sts-dev.csv, not in --data_dir"):
        read_run(folder, tmp_path / "nowhere")
    write_predictions(folder / "sts-dev-output.csv", "sts", [e.id for e in sts[1:]], pred[1:])
    with pytest.raises(MinbertError, match=rf"no prediction for 1 of the {len(sts)} ids .*: not that dev set"):
        read_run(folder, course_data)


def test_a_sonnet_runs_completions_are_scored_with_chrf(tmp_path):
    data = real_data_folder("TRUE_sonnets_held_out_dev.txt")
    folder = tmp_path / "son"
    folder.mkdir()
    prompts = read_sonnets(data / "sonnets_held_out_dev.txt")
    shutil.copy(data / "sonnets_held_out_dev.txt", folder / "generated_sonnets_dev.txt")
    run = read_run(folder, data)
    true = dict(read_sonnets(data / "TRUE_sonnets_held_out_dev.txt"))
    expected = sacrebleu.corpus_chrf([t for _, t in prompts], [[true[n] for n, _ in prompts]]).score
    assert run.tasks["sonnets"].value == pytest.approx(expected)
    assert list(run.tasks["sonnets"].ids) == [n for n, _ in prompts]


def test_bad_folders_and_other_dev_sets_are_one_line(tmp_path):
    with pytest.raises(MinbertError, match="nope: no such run folder"):
        read_run(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(MinbertError, match=r"empty: no dev outputs \(no \*-dev-scores.npz, dev prediction file"):
        read_run(tmp_path / "empty")
    (tmp_path / "empty" / "x.txt").write_text("x")
    with pytest.raises(MinbertError, match=r"x.txt: a file; give the folder of the run it belongs to"):
        read_run(tmp_path / "empty" / "x.txt")
    for pipeline, said in (("pretrain", "the folder of a pretrain.py run, which writes no dev outputs"),
                           ("classifier", r"no dev outputs .*: the folder of a classifier.py run that did not finish")):
        (tmp_path / pipeline).mkdir()  # the mark a run folder gets, naming the pipeline that wrote it
        (tmp_path / pipeline / ".minbert-run").write_text(json.dumps({"pipeline": pipeline}))
        with pytest.raises(MinbertError, match=rf"{pipeline}: {said}"):
            read_run(tmp_path / pipeline)
    ids = [f"i{k}" for k in range(20)]
    gold = np.arange(20) % 5
    pred = gold.astype(float)
    pred[3] = np.nan
    make_compared_run(tmp_path / "nan", {"sts": (ids, gold, pred)})
    with pytest.raises(MinbertError, match=r"sts-dev-scores.npz: 1 of 20 dev predictions are not numbers \(NaN, "
                                           r"first at id i3\): the run diverged"):
        read_run(tmp_path / "nan")
    damaged = make_compared_run(tmp_path / "damaged", {"sst": (ids, gold, gold)})
    (damaged / "sst-dev-scores.npz").write_bytes(b"PK\x03\x04 not really")
    with pytest.raises(MinbertError, match=r"sst-dev-scores.npz: cannot read dev scores"):
        read_run(damaged)
    (damaged / "sst-dev-scores.npz").write_text("a text file under the name\n")
    with pytest.raises(MinbertError, match=r"sst-dev-scores.npz: not a dev-scores file \(a NumPy .npz, which is a "
                                           r"zip; this one begins b'a te'\)"):
        read_run(damaged)
    a = read_run(make_compared_run(tmp_path / "a", {"sst": (ids, gold, gold)})).tasks["sst"]
    shuffled = read_run(make_compared_run(tmp_path / "b", {"sst": (ids[::-1], gold[::-1], gold[::-1])})).tasks["sst"]
    assert list(aligned(a, shuffled).ids) == ids  # the same dev set in another order is put in order
    np.testing.assert_array_equal(aligned(a, shuffled).stats, a.stats)  # with its statistics, row by row
    gold_nan = gold.astype(float)
    gold_nan[2] = np.nan  # a broken dev row: predicted, not scored
    pred_nan = gold.astype(float)
    pred_nan[2] = np.nan  # whatever its prediction, even NaN, it does not count
    kept = read_run(make_compared_run(tmp_path / "unscored-nan", {"sts": (ids, gold_nan, pred_nan)})).tasks["sts"]
    assert len(kept.ids) == 19 and "i2" not in list(kept.ids)
    other = read_run(make_compared_run(tmp_path / "c", {"sst": (ids[:-1] + ["new"], gold, gold)})).tasks["sst"]
    with pytest.raises(MinbertError, match=r"c/sst-dev-scores.npz: not the dev set of .*a/sst-dev-scores.npz "
                                           r"\(20 labelled examples against 20; id i19 is in one only\)"):
        aligned(a, other)
    relabelled = read_run(make_compared_run(tmp_path / "d", {"sst": (ids, (gold + 1) % 5, gold)})).tasks["sst"]
    with pytest.raises(MinbertError, match=r"the same dev ids as .* with other gold labels \(id i0: '1.0' against "
                                           r"'0.0'\): another version of the dev data"):
        aligned(a, relabelled)


def test_a_prediction_files_unlabelled_dev_row_is_predicted_not_scored(tmp_path, course_data):
    """A broken course row (its label empty) keeps its prediction in the file but counts in no score: the dev
    accuracy is the one over the labelled rows, whatever the unlabelled row's prediction."""
    path = course_data / "quora-dev.csv"
    lines = path.read_text().splitlines()
    header, row = lines[0].split("\t"), lines[1].split("\t")
    row[header.index("is_duplicate")] = ""
    path.write_text("\n".join([lines[0], "\t".join(row), *lines[2:]]) + "\n")
    examples = read_examples(path, "quora", "dev", log=lambda *_: None)
    folder = tmp_path / "run"
    folder.mkdir()
    write_predictions(folder / "para-dev-output.csv", "quora", [e.id for e in examples], [1] * len(examples))
    quora = read_run(folder, course_data).tasks["quora"]
    labelled = [e.label for e in examples if e.label is not None]
    assert len(labelled) == len(examples) - 1 and len(quora.ids) == len(labelled)
    assert quora.value == pytest.approx(np.mean([label == 1 for label in labelled]))


def test_a_task_is_read_from_its_raw_outputs_first_then_the_handouts_file_name_then_any_other(tmp_path, course_data):
    """SST with a dev-scores file and a prediction file: the dev-scores file is read; without it, the handout's
    sst-dev-output.csv before a Part 1 run's full-model-sst-dev-out.csv; the tasks come in the metrics' order
    (sst, cfimdb, quora, sts) whatever order the files sort in."""
    sst = [e for e in read_examples(data_file(course_data, "sst", "dev"), "sst", "dev") if e.label is not None]
    cfimdb = [e for e in read_examples(data_file(course_data, "cfimdb", "dev"), "cfimdb", "dev")
              if e.label is not None]
    ids, gold = [e.id for e in sst], np.array([e.label for e in sst])
    right, wrong = list(gold), [(g + 1) % 5 for g in gold]
    half = [g if i % 2 else (g + 1) % 5 for i, g in enumerate(gold)]
    folder = make_compared_run(tmp_path / "run", {"sst": (ids, gold.astype(float), right)})
    write_predictions(folder / "sst-dev-output.csv", "sst", ids, wrong)
    write_predictions(folder / "full-model-cfimdb-dev-out.csv", "cfimdb", [e.id for e in cfimdb],
                      [e.label for e in cfimdb])
    run = read_run(folder, course_data)
    assert list(run.tasks) == ["sst", "cfimdb"] and run.tasks["sst"].value == 1.0
    assert run.tasks["cfimdb"].value == 1.0
    (folder / "sst-dev-scores.npz").unlink()
    write_predictions(folder / "full-model-sst-dev-out.csv", "sst", ids, half)  # sorts before sst-dev-output.csv
    assert read_run(folder, course_data).tasks["sst"].value == 0.0  # the handout's name: every one wrong
    (folder / "sst-dev-output.csv").unlink()
    assert read_run(folder, course_data).tasks["sst"].value == pytest.approx(accuracy(half, list(gold)))


def test_only_labelled_rows_count_as_broken_predictions(tmp_path):
    """Of 4 rows, one unlabelled: its NaN prediction is no problem; two NaN predictions of labelled rows are '2 of
    3', the first named by id."""
    ids, gold = ["a", "b", "c", "d"], [1.0, np.nan, 2.0, 3.0]
    ok = read_run(make_compared_run(tmp_path / "ok", {"sts": (ids, gold, [1.0, np.nan, 2.5, 2.0])})).tasks["sts"]
    assert list(ok.ids) == ["a", "c", "d"]
    assert ok.value == pytest.approx(np.corrcoef([1.0, 2.5, 2.0], [1.0, 2.0, 3.0])[0, 1])
    with pytest.raises(MinbertError, match=r"2 of 3 dev predictions are not numbers \(NaN, first at id c\)"):
        read_run(make_compared_run(tmp_path / "bad", {"sts": (ids, gold, [1.0, 2.0, np.nan, np.inf])}))
