"""multitask_classifier.py: the handout's functions on a parsed command line: train_multitask trains and writes the
six files, test_multitask re-scores a saved model into the same files, and without --eval_only says what it needs;
MultitaskBERT is importable from here as the handout writes it. The starter's save_model writes what test_multitask
re-scores, and its constants say what the starter's do."""
import pytest
import torch

import multitask_classifier as mt
from config import BertConfig
from datasets import load_multitask_data
from evaluation import model_eval_multitask
from minbert.course_data import MULTITASK, data_file
from minbert.tasks.multitask import MultitaskBERT
from optimizer import AdamW
from tests.checkpoints import multitask_spec, parameters_with_gradients
from tests.course import eval_only_args, output_files, part2_args
from tokenizer import BertTokenizer
from utils import MinbertError


def test_train_then_test_multitask_write_the_same_files(tmp_path, course_data, tiny_model):
    argv = part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "2")
    trained = mt.train_multitask(mt.get_args(argv))
    written = output_files(tmp_path / "pred")
    assert len(written) == 6
    rescore = eval_only_args(argv, tmp_path / "ck" / "mt.pt", tmp_path / "eval")
    assert mt.test_multitask(mt.get_args(rescore)) == pytest.approx(trained)
    assert output_files(tmp_path / "pred") == written
    with pytest.raises(MinbertError, match="test_multitask re-scores a saved model: give --eval_only"):
        mt.test_multitask(mt.get_args(argv))
    assert mt.MultitaskBERT is MultitaskBERT


def test_save_model_writes_what_test_multitask_rescores(tmp_path, course_data, tiny_model):
    mt.seed_everything(0)
    config = multitask_spec(tiny_model)
    model = mt.MultitaskBERT(config)
    optimizer = AdamW(model.parameters(), lr=1e-3)
    parameters_with_gradients(model)  # one backward pass through the three heads, then the starter's step
    optimizer.step()
    argv = part2_args(tmp_path, course_data, tiny_model, "--amp", "none")  # fp32, as the expected scores below
    (tmp_path / "ck").mkdir()
    saved = mt.save_model(model, optimizer, mt.get_args(argv), config, tmp_path / "ck" / "mine.pt")
    scores = mt.test_multitask(mt.get_args(eval_only_args(argv, saved, tmp_path / "eval")))
    paths = {t: {"dev": data_file(course_data, t, "dev")} for t in MULTITASK}
    dev = load_multitask_data(paths, BertTokenizer.from_pretrained(str(tiny_model)), config.max_length,
                              config.pair_encoding, ("dev",))["dev"]
    assert scores == pytest.approx(model_eval_multitask(model, dev, 64, torch.device("cpu"))[0])
    assert len(output_files(tmp_path / "pred")) == 6


def test_the_starters_constants():
    assert mt.BERT_HIDDEN_SIZE == BertConfig().hidden_size == 768  # bert-base-uncased's, the handout's model
    assert mt.N_SENTIMENT_CLASSES == 5
    assert mt.seed_everything.__defaults__ == (11711,)
