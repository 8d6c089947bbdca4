"""tasks/sentiment.py: BertSentimentClassifier is BERT's pooled output, dropout and a linear layer; its cached-features
path gives the logits running BERT gives; the head's dropout acts in training; what trains follows the mode; a saved
one is rebuilt from its checkpoint."""
import pytest
import torch

from minbert.runs.checkpoint import save_model
from minbert.specs import ModelSpec
from minbert.tasks.multitask import MultitaskBERT
from minbert.tasks.sentiment import BertSentimentClassifier, load_classifier
from tests.checkpoints import multitask_spec, sentiment_batch, sentiment_model
from utils import MinbertError


def test_the_logits_are_the_pooled_output_through_the_head_and_cached_features_give_the_same(tiny_model):
    model = BertSentimentClassifier(ModelSpec(pipeline="classifier", pretrained=str(tiny_model), dropout=[0.3],
                                              num_labels=5)).eval()
    batch = sentiment_batch()
    x = batch["x"]
    pooled = model.bert(x["input_ids"], x["attention_mask"], x["token_type_ids"])["pooler_output"]
    logits = model.logits(batch)
    assert logits.shape == (2, 5)
    torch.testing.assert_close(logits, model.classifier(pooled))
    torch.testing.assert_close(model.logits({"features": model.embed(**x)}), logits)


def test_what_trains_follows_the_mode(tiny_model):
    frozen = BertSentimentClassifier(ModelSpec(pipeline="classifier", pretrained=str(tiny_model),
                                               fine_tune_mode="last-linear-layer", num_labels=2))
    assert {n for n, p in frozen.named_parameters() if p.requires_grad} == {"classifier.weight", "classifier.bias"}
    full = BertSentimentClassifier(ModelSpec(pipeline="classifier", pretrained=str(tiny_model), num_labels=2))
    assert all(p.requires_grad for p in full.parameters())


def test_the_head_drops_the_pooled_output_in_training_only(tiny_model):
    """Handout 4.2: pooler output -> dropout -> linear; at dropout 1 a training pass leaves the bias alone."""
    model = sentiment_model(tiny_model, 1.0)
    features = torch.randn(3, model.bert.config.hidden_size)
    torch.testing.assert_close(model(features=features), model.classifier.bias.expand(3, -1))
    model.eval()
    torch.testing.assert_close(model(features=features), model.classifier(features))


def test_load_classifier_rebuilds_a_saved_model_and_refuses_another_pipelines(tmp_path, tiny_model):
    model = sentiment_model(tiny_model, 0.0).eval()
    with torch.no_grad():
        model.classifier.weight.add_(1.0)  # not the head a fresh model draws
    save_model(tmp_path / "p1.pt", model)
    loaded, spec = load_classifier(tmp_path / "p1.pt")
    assert spec == model.spec
    torch.testing.assert_close(loaded.eval().logits(sentiment_batch()), model.logits(sentiment_batch()))
    save_model(tmp_path / "p2.pt", MultitaskBERT(multitask_spec(tiny_model)))
    with pytest.raises(MinbertError, match=r"p2.pt: not a classifier.py checkpoint \(it was written by "
                                           r"multitask_classifier.py\)$"):
        load_classifier(tmp_path / "p2.pt")
