"""losses.py by hand, and --sts_loss / --mnrl_weight / --simcse_weight / --siamese_proj in Part 2."""
import pytest
import torch

import multitask_classifier as mt
from tests.helpers import part2_args


def test_every_embedding_option_end_to_end(tmp_path, course_data, tiny_model):
    args = part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--pair_encoding", "siamese",
                   "--sts_loss", "cosent", "--mnrl_weight", "0.5", "--simcse_weight", "0.1", "--siamese_proj", "16")
    trained = mt.main(args)
    saved = torch.load(tmp_path / "ck" / "mt.pt", weights_only=True)["model"]
    assert saved["proj.weight"].shape == (16, 32)
    rescored = mt.main(part2_args(tmp_path, course_data, tiny_model, "--eval_only", str(tmp_path / "ck" / "mt.pt")))
    assert rescored == pytest.approx(trained)  # the projection comes back from the checkpoint


@pytest.mark.parametrize("loss", ["cosine", "cosent"])
def test_similarity_losses_with_cross_pairs(tmp_path, course_data, tiny_model, loss):
    scores = mt.main(part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--sts_loss", loss))
    assert -1 <= scores["sts"] <= 1
