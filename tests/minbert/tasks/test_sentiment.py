"""tasks/sentiment.py: BertSentimentClassifier is BERT's pooled output, dropout and a linear layer; its cached-features
path gives the logits running BERT gives; the head's dropout acts in training; what trains follows the mode."""
import torch

from minbert.specs import ModelSpec
from minbert.tasks.sentiment import BertSentimentClassifier
from tests.checkpoints import sentiment_batch, sentiment_model


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
