"""Part 1 of Build GPT-2 (handout section 6.2): GPT2SentimentClassifier, and its
pipeline on the shared Part 1 code.

The classifier reads GPT-2's hidden state of each sentence's last token (the only position that has seen the
whole sentence, attention being causal), applies dropout and a linear layer. --fine-tune-mode
last-linear-layer trains the linear layer on a frozen GPT-2 (the handout's "pretraining" rows), full-model
trains everything, lora and dora train low-rank adapters on GPT-2's attention and MLP projections
(minbert/finetuning/lora.py, --lora_targets), adapter trains Houlsby bottleneck adapters after each
sub-layer's output projection (minbert/finetuning/houlsby.py).

GPT2SentimentPipeline is minbert's Part 1 pipeline (minbert/pipelines/classifier.py) with GPT-2's tokenizer
and model: the same data, batches, epoch protocol, checkpoints, --resume and run folders. Its files are the
handout's `finetune-{sst,cfimdb}-{dev,test}-out.csv` (full-model) and `pretrain-...` (last-linear-layer)."""
import torch.nn as nn

from gpt2.models.gpt2 import GPT2Model
from gpt2.tokenizer import GPT2Tokenizer
from minbert.cli import MinbertError, main_print
from minbert.finetuning.modes import GPT2_MODES, MODES, prepare_backbone
from minbert.pipelines.classifier import SentimentPipeline
from minbert.specs import ModelSpec



class GPT2SentimentClassifier(nn.Module):

    @property
    def backbone(self):
        """The pretrained network inside (the backbone contract: bert.py BertModel.layers, .embeddings)."""
        return self.gpt

    def __init__(self, spec: ModelSpec, attn="sdpa"):
        super().__init__()
        if spec.fine_tune_mode not in GPT2_MODES:
            raise MinbertError(f"--fine-tune-mode {spec.fine_tune_mode}: GPT-2's classifier trains "
                               f"{' or '.join(GPT2_MODES)}")
        self.spec, self.num_labels = spec, spec.num_labels
        self.gpt = GPT2Model.from_pretrained(spec.pretrained, attn_impl=attn)
        # the shared modes table: what trains, and LoRA's adapters on its linears
        prepare_backbone(self.gpt, spec)
        self.dropout = nn.Dropout(spec.dropout[0])
        self.classifier = nn.Linear(self.gpt.config.hidden_size, spec.num_labels)

    def embed(self, input_ids, attention_mask, token_type_ids=None):
        """The hidden state of each row's last real token (rows are padded on the right)."""
        return self.gpt(input_ids, attention_mask)["last_token"]

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, features=None):
        """Logits; `features` are cached last-token states of a frozen GPT-2, used instead of running it."""
        last = features if features is not None else self.embed(input_ids, attention_mask)
        return self.classifier(self.dropout(last))

    def logits(self, batch):
        return self(features=batch["features"]) if "features" in batch else self(**batch["x"])


class GPT2SentimentPipeline(SentimentPipeline):
    kind = "gpt2-classifier"

    @staticmethod
    def load_tokenizer(pretrained):
        return GPT2Tokenizer.from_pretrained(pretrained, log=main_print)

    @staticmethod
    def build_model(spec, runtime):
        return GPT2SentimentClassifier(spec, runtime.attn)

    @staticmethod
    def stem(settings, name):
        return f"{MODES[settings.model.fine_tune_mode].gpt2_files}-{name}"
