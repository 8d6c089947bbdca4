"""Part 2 of Build GPT-2 (handout section 7.1): paraphrase detection on Quora as a cloze task.

Rather than a new classification head, each pair becomes a question the language model answers with a word:

    Is "{question 2}" a paraphrase of "{question 1}"? Answer yes or no:

and the prediction is whichever of " yes" and " no" the LM head (the tied token embeddings) scores higher at
the prompt's last token. Training is cross-entropy over those two tokens' logits, so the model learns to
answer in its own vocabulary; the two ids are read from the tokenizer, never written down.

GPT2ParaphrasePipeline is minbert's Part 1 pipeline with the prompts as single-sentence examples, so the run
folders, --resume, batches and epoch protocol are the shared ones; the files are the handout's
para-{dev,test}-output.csv (id , Predicted_Is_Paraphrase)."""
import dataclasses

import torch
import torch.nn as nn
import torch.nn.functional as F

from datasets import SentenceClassificationDataset
from gpt2.models.gpt2 import GPT2Model
from gpt2.sentiment import GPT2SentimentPipeline
from gpt2.tokenizer import GPT2Tokenizer
from minbert.cli import MinbertError, main_print
from minbert.course_data import TASKS, Example, data_file, read_examples

PROMPT = 'Is "{1}" a paraphrase of "{0}"? Answer yes or no:'
ANSWERS = (" no", " yes")  # label 0, label 1
# Quora's labels and leaderboard column, one text (the prompt) per example
CLOZE = dataclasses.replace(TASKS["quora"], text_cols=("prompt",))


def cloze_examples(examples):
    """Quora pairs as prompts (a broken row's missing question stays empty, so its id still gets a prediction)."""
    return [Example(e.id, (PROMPT.format(*e.texts),), e.label, e.line) for e in examples]


class GPT2ParaphraseCloze(nn.Module):

    @property
    def backbone(self):
        """The pretrained network inside (the backbone contract: bert.py BertModel.layers, .embeddings)."""
        return self.gpt

    def __init__(self, spec, attn="sdpa"):
        super().__init__()
        if spec.fine_tune_mode != "full-model":
            raise MinbertError(f"--fine-tune-mode {spec.fine_tune_mode}: the cloze task trains the whole "
                               "model (its answers come from the LM head, which is the token embeddings)")
        self.spec = spec
        self.gpt = GPT2Model.from_pretrained(spec.pretrained, attn_impl=attn)
        tokenizer = GPT2Tokenizer.from_pretrained(spec.pretrained)
        try:
            answers = [tokenizer.token_id(a) for a in ANSWERS]
        except MinbertError as e:  # a small vocabulary of its own (tools/tiny_gpt2.py's) may split an answer
            raise MinbertError(f"--pretrained {spec.pretrained}: {e}; the cloze task answers with one token "
                               f"each ({' and '.join(map(repr, ANSWERS))}), so it needs a vocabulary holding "
                               "both as one token, as GPT-2's does") from None
        self.register_buffer("answer_ids", torch.tensor(answers), persistent=False)

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        """[B, 2]: the LM head's logits for " no" and " yes" after each prompt: the two rows of the tied head
        alone, not the whole vocabulary's (50,257 logits a row) to keep two."""
        last = self.gpt(input_ids, attention_mask)["last_token"]
        return F.linear(last, self.gpt.word_embedding.weight[self.answer_ids])

    def logits(self, batch):
        return self(**batch["x"])


class GPT2ParaphrasePipeline(GPT2SentimentPipeline):
    kind = "gpt2-paraphrase"

    @staticmethod
    def build_model(spec, runtime):
        return GPT2ParaphraseCloze(spec, runtime.attn)

    @staticmethod
    def stem(settings, name):
        return "para"

    @classmethod
    def published_names(cls, settings, name):
        return {split: f"para-{split}-output.csv" for split in ("dev", "test")}

    def dataset(self, split, tokenizer):
        settings, length = self.settings, self.settings.model.max_length
        # GPT-2 reads a prompt's last token for its answer, and a prompt is cut at its end: the template alone
        # must fit, with room for the questions, or no input would hold the cue it answers after
        template = len(tokenizer.encode(PROMPT.format("", "")))
        if length < template + 2:
            raise MinbertError(f"--max_length {length}: the cloze prompt alone takes {template} tokens "
                               f"({PROMPT.format('', '')!r}); give at least {template + 2}, room for the two "
                               "questions (default: the model's positions)")
        examples = cloze_examples(read_examples(data_file(settings.data_dir, "quora", split), "quora", split))
        data = SentenceClassificationDataset(examples, CLOZE, tokenizer, length)
        cut = int((data.lengths >= length).sum())  # (one exactly that long is counted too)
        if cut:
            main_print(f"quora {split}: {cut} of {len(examples)} prompts reach --max_length {length}: a longer one "
                       "is cut at its end, the answer cue with it")
        return data

    @staticmethod
    def raw_output(logits):
        """The Quora logit report.py reads: the log-odds of " yes" against " no"."""
        return logits[:, 1] - logits[:, 0]
