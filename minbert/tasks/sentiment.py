"""The Part 1 model (handout section 4.2's BertSentimentClassifier): BERT's pooled
output, dropout, a linear layer.

classifier.py trains it (pipelines/classifier.py) and re-exports it, so `from classifier import
BertSentimentClassifier` works as the handout writes it; bench.py times the same module, and `load_classifier`
rebuilds a saved one.
"""
import torch.nn as nn

from bert import BertModel
from minbert.finetuning.modes import prepare_backbone
from minbert.runs.checkpoint import load_checkpoint, load_trainable_state, read_spec
from minbert.specs import ModelSpec


class BertSentimentClassifier(nn.Module):
    """BERT -> pooler_output -> dropout -> linear. What of BERT trains follows spec.fine_tune_mode: nothing in
    'last-linear-layer', everything in 'full-model', only the adapters in 'lora', 'dora', 'adapter' and
    'prefix'. `config` is its specs.ModelSpec (the starter's name for it); `bert` (a BertModel) replaces the one
    config.pretrained names (bench.py's random models); `attn` and `fast_dropout` are BertConfig's runtime
    choices."""

    @property
    def backbone(self):
        """The pretrained network inside (the backbone contract: bert.py BertModel.layers, .embeddings)."""
        return self.bert

    def __init__(self, config: ModelSpec, attn="sdpa", bert=None, fast_dropout=True):
        super().__init__()
        spec = self.spec = config
        self.num_labels = spec.num_labels
        self.bert = bert if bert is not None else BertModel.from_pretrained(spec.pretrained, attn_impl=attn,
                                                                           fast_dropout=fast_dropout)
        prepare_backbone(self.bert, spec)
        self.dropout = nn.Dropout(spec.dropout[0])
        self.classifier = nn.Linear(self.bert.config.hidden_size, spec.num_labels)

    def embed(self, input_ids, attention_mask, token_type_ids=None):
        return self.bert(input_ids, attention_mask, token_type_ids)["pooler_output"]

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, features=None):
        """Logits; `features` are cached pooler outputs of a frozen BERT, used instead of running it."""
        pooled = features if features is not None else self.embed(input_ids, attention_mask, token_type_ids)
        return self.classifier(self.dropout(pooled))

    def logits(self, batch):
        """The logits of a batch (token inputs, or cached features): the one path training and evaluation use."""
        return self(features=batch["features"]) if "features" in batch else self(**batch["x"])


def load_classifier(path, device="cpu", attn="sdpa"):
    """The Part 1 model saved in checkpoint `path` (a run's, or save_model's), rebuilt from its own spec on
    `device`. Returns (model, spec)."""
    state = load_checkpoint(path)
    spec = read_spec(state, path, "classifier")
    model = BertSentimentClassifier(spec, attn).to(device)
    load_trainable_state(model, state["model"], path)
    return model, spec
