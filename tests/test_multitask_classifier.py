"""multitask_classifier.py: the handout's functions on a parsed command line: train_multitask trains and writes the
six files, test_multitask re-scores a saved model into the same files, and without --eval_only says what it needs;
MultitaskBERT is importable from here as the handout writes it."""
import pytest

import multitask_classifier as mt
from minbert.tasks.multitask import MultitaskBERT
from tests.course import eval_only_args, output_files, part2_args
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
