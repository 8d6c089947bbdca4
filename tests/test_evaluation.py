"""evaluation.py: batched inference gives each output back to its example's row. (The metrics and leaderboard
files it re-exports, and --score: tests/minbert/test_scoring.py.)"""
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
