"""gpt2/sentiment.py: GPT2SentimentClassifier reads the last real token through dropout and a linear layer; what
trains follows the mode; the pipeline names the handout's files."""
import pytest
import torch

from gpt2.sentiment import GPT2SentimentClassifier, GPT2SentimentPipeline
from minbert.specs import ClassifierSettings, ModelSpec, Recipe
from utils import MinbertError


def _spec(model, mode):
    return ModelSpec(pipeline="gpt2-classifier", pretrained=str(model), fine_tune_mode=mode, dropout=[0.0], num_labels=5)


def test_logits_are_the_head_on_the_last_real_token(tiny_gpt2):
    model = GPT2SentimentClassifier(_spec(tiny_gpt2, "full-model")).eval()
    ids = torch.tensor([[3, 9, 4, 7], [5, 6, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    with torch.no_grad():
        logits = model(ids, mask)
        hidden = model.gpt(ids, mask)["last_hidden_state"]
    expected = model.classifier(torch.stack([hidden[0, 3], hidden[1, 1]]))
    torch.testing.assert_close(logits, expected)


def test_what_trains_follows_the_mode(tiny_gpt2):
    frozen = GPT2SentimentClassifier(_spec(tiny_gpt2, "last-linear-layer"))
    assert not any(p.requires_grad for p in frozen.gpt.parameters())
    assert all(p.requires_grad for p in frozen.classifier.parameters())
    assert all(p.requires_grad for p in GPT2SentimentClassifier(_spec(tiny_gpt2, "full-model")).parameters())
    with pytest.raises(MinbertError, match="--fine-tune-mode lora: GPT-2's classifier trains last-linear-layer or "
                                           "full-model"):
        GPT2SentimentClassifier(_spec(tiny_gpt2, "lora"))


def test_the_files_are_the_handouts(tiny_gpt2):
    for mode, prefix in (("full-model", "finetune"), ("last-linear-layer", "pretrain")):
        s = ClassifierSettings(model=_spec(tiny_gpt2, mode), recipe=Recipe(lr=1e-3))
        assert GPT2SentimentPipeline.stem(s, "sst") == f"{prefix}-sst"
