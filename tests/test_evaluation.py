"""evaluation.py: batched inference gives each output back to its example's row. (The metrics and leaderboard
files it re-exports, and --score: tests/minbert/test_scoring.py.)"""
import re

from datasets import SentenceClassificationDataset
from evaluation import predict
from minbert.course_data import read_examples
from tokenizer import BertTokenizer


def test_predict_gives_the_outputs_back_in_the_datas_own_order(course_data, tiny_model):
    """Batches run length-sorted; each output goes back to its example's row."""
    data = SentenceClassificationDataset(read_examples(course_data / "ids-sst-dev.csv", "sst", "dev"), "sst",
                                         BertTokenizer.from_pretrained(str(tiny_model)))
    assert sorted(data.lengths.tolist()) != data.lengths.tolist()  # so sorting moves rows
    out = predict(lambda b: b["x"]["attention_mask"].sum(1), data, 4, "cpu")
    assert out.tolist() == data.lengths.tolist()


def test_score_names_a_gold_file_that_is_missing_a_folder_or_a_broken_link_as_what_it_is(tmp_path, course_data):
    """evaluation.py --score PRED GOLD: a gold file that is not there is said so (not "cannot tell the task from
    the file name", nor a --data_dir evaluation.py does not have), with or without --task; so is a folder, a
    dangling link, and a missing prediction file."""
    import pytest
    import evaluation
    from utils import MinbertError
    pred = tmp_path / "sst-dev-output.csv"
    pred.write_text("id \t Predicted_Sentiment \n")
    gone = tmp_path / "nope.csv"
    link = tmp_path / "link.csv"
    link.symlink_to(tmp_path / "missing-target")
    for gold, task, why in ((gone, [], "labelled CSV \\(the gold file\\) not found"),
                            (gone, ["--task", "sst"], "labelled CSV \\(the gold file\\) not found"),
                            (course_data, [], "is a folder; give the labelled CSV"),
                            (link, [], "is a broken link \\(its target is missing\\)")):
        with pytest.raises(MinbertError, match=rf"^--score \.\.\. {re.escape(str(gold))}: {why}"):
            evaluation.main(["--score", str(pred), str(gold), *task])
    with pytest.raises(MinbertError, match=r"^--score .*nothing.csv: prediction file not found"):
        evaluation.main(["--score", str(tmp_path / "nothing.csv"), str(course_data / "ids-sst-dev.csv")])
