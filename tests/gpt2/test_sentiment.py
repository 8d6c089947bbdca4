"""gpt2/sentiment.py: GPT2SentimentClassifier reads the last real token through dropout and a linear layer; what
trains follows the mode; the pipeline names the handout's files."""
import dataclasses

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
    with pytest.raises(MinbertError, match="--fine-tune-mode prefix: GPT-2's classifier trains last-linear-layer or "
                                           "full-model or lora or dora or adapter"):
        GPT2SentimentClassifier(_spec(tiny_gpt2, "prefix"))


@pytest.mark.parametrize("mode", ["lora", "dora"])
def test_lora_on_gpt2s_projections_trains_only_adapters_and_merges_exactly(tiny_gpt2, mode):
    from minbert.finetuning.modes import merge_for_inference
    spec = dataclasses.replace(_spec(tiny_gpt2, mode), lora_targets=("query", "value", "interm_dense"))
    model = GPT2SentimentClassifier(spec).eval()
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith("classifier.") or n.split(".")[-1] in ("lora_A", "lora_B", "magnitude")
                             for n in trainable)
    assert sum(".interm_dense.lora_A" in n for n in trainable) == model.gpt.config.num_hidden_layers
    with torch.no_grad():
        for n, p in model.named_parameters():
            if n.endswith("lora_B"):
                p.normal_()  # a trained adapter, so that merging has something to fold
        ids, mask = torch.tensor([[3, 9, 4, 7]]), torch.ones(1, 4, dtype=torch.long)
        before = model(ids, mask)
        merge_for_inference(model.gpt, True, mode, lambda *_: None)
        after = model(ids, mask)
    assert not any("lora" in n for n, _ in model.named_parameters())
    torch.testing.assert_close(after, before, rtol=1e-4, atol=1e-5)


def test_the_files_are_the_handouts(tiny_gpt2):
    for mode, prefix in (("full-model", "finetune"), ("last-linear-layer", "pretrain")):
        s = ClassifierSettings(model=_spec(tiny_gpt2, mode), recipe=Recipe(lr=1e-3))
        assert GPT2SentimentPipeline.stem(s, "sst") == f"{prefix}-sst"


def test_houlsby_adapters_sit_after_gpt2s_output_projections(tiny_gpt2):
    spec = dataclasses.replace(_spec(tiny_gpt2, "adapter"), adapter_dim=4)
    model = GPT2SentimentClassifier(spec)
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    layers = model.gpt.config.num_hidden_layers
    assert sum(n.endswith("attention_dense.down.weight") or n.endswith("out_dense.down.weight") for n in trainable) == 2 * layers
    assert not any(n.endswith("base.weight") or "self_attention" in n for n in trainable)
    with torch.no_grad():  # near-identity at the start: the backbone's outputs barely move
        ids, mask = torch.tensor([[3, 9, 4, 7]]), torch.ones(1, 4, dtype=torch.long)
        plain = GPT2SentimentClassifier(_spec(tiny_gpt2, "full-model")).eval().gpt(ids, mask)["last_token"]
        torch.testing.assert_close(model.eval().gpt(ids, mask)["last_token"], plain, rtol=0.05, atol=0.05)
