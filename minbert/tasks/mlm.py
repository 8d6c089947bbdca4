"""Masked language modelling (Devlin et al. 2019, section 3.1, "Task #1: Masked LM"), and the next-sentence
head of "Task #2" (its sentence pairs: tasks/nsp.py), for pretrain.py (pipelines/pretrain.py).

Masking rule: each non-special token is chosen with probability p (0.15); a chosen token is replaced by
[MASK] 80% of the time, by a random vocabulary token 10%, and kept 10%; the loss is cross-entropy on the
chosen positions only (labels are -100 everywhere else).

The head is BERT's: logits = LN(GELU(W h + b)) E^T + c, with E the word embeddings (the decoder is tied
to them, so it adds only a bias). It is loaded from the checkpoint's `cls.predictions.*` tensors when the
checkpoint has them (bert-base-uncased does), and starts fresh otherwise (all-minilm-l6-v2 has none).

The next-sentence head (with nsp=True) is BERT's too: two logits, IsNext and NotNext, W p + b on the
pooled output p = tanh(W_p h_[CLS] + b_p) (bert.py's pooler); loaded from `cls.seq_relationship.*` where
the checkpoint has it, fresh otherwise. The names of both heads' tensors are base_bert's HF_HEADS table.
"""
from typing import NamedTuple, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F

from base_bert import HF_HEADS, ours_to_hf, read_state_dict
from bert import BertModel
from minbert.cli import MinbertError
from minbert.hub import resolve_pretrained

IGNORE = -100
HEAD_WORDS = {"mlm": "MLM", "nsp": "NSP"}


def mask_tokens(input_ids, special, vocab_size, mask_id, mask_prob=0.15, generator=None):
    """(inputs, labels): BERT's 80/10/10 corruption of `input_ids` [B, T]. `special` is a bool tensor of
    the same shape marking positions never chosen ([CLS], [SEP], padding)."""
    def coin(p):
        return torch.rand(input_ids.shape, generator=generator) < p
    chosen = coin(mask_prob) & ~special
    labels = torch.where(chosen, input_ids, torch.full_like(input_ids, IGNORE))
    to_mask = chosen & coin(0.8)
    to_random = chosen & ~to_mask & coin(0.5)  # half of the remaining 20%
    inputs = torch.where(to_mask, torch.full_like(input_ids, mask_id), input_ids)
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator)
    inputs = torch.where(to_random, random_ids, inputs)
    return inputs, labels


class BertMLMHead(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.bias = nn.Parameter(torch.zeros(config.vocab_size))

    def forward(self, hidden, word_embeddings):
        return F.linear(self.layer_norm(F.gelu(self.dense(hidden))), word_embeddings, self.bias)


class Predictions(NamedTuple):
    """What BertForMaskedLM gives for a batch: the mean cross-entropy over the chosen tokens, their logits and
    labels, and the next-sentence logits [B, 2] of each row (None without that head)."""
    loss: torch.Tensor
    logits: torch.Tensor
    gold: torch.Tensor
    next_logits: Optional[torch.Tensor]


class BertForMaskedLM(nn.Module):
    @property
    def backbone(self):
        """The pretrained network inside (the backbone contract: bert.py BertModel.layers, .embeddings)."""
        return self.bert

    def __init__(self, bert, nsp=False):
        super().__init__()
        self.bert, self.config = bert, bert.config
        # The decoder is tied to the word embeddings, and autograd adds its dense gradient into
        # whatever weight.grad holds: with the lookup's reused gradient buffer (minbert/embedding_grad.py)
        # that would be the buffer, whose rows the lookup alone does not zero again, so each step would
        # carry every earlier step's decoder gradient. The gradient is dense here anyway, so torch's
        # own backward costs nothing more.
        bert.word_embedding.reuse_grad = False
        self.head = BertMLMHead(bert.config)
        std = bert.config.initializer_range
        nn.init.normal_(self.head.dense.weight, std=std)
        nn.init.zeros_(self.head.dense.bias)
        self.nsp = nn.Linear(bert.config.hidden_size, 2) if nsp else None  # IsNext (0), NotNext (1)
        if nsp:
            nn.init.normal_(self.nsp.weight, std=std)
            nn.init.zeros_(self.nsp.bias)

    def heads(self):
        """{head: module} of the heads this model has (base_bert.HF_HEADS names their tensors)."""
        return {name: m for name, m in (("mlm", self.head), ("nsp", self.nsp)) if m is not None}

    @classmethod
    def from_pretrained(cls, name_or_path, nsp=False, **overrides):
        """BERT from any --pretrained value, with the next-sentence head if `nsp`; each head from the
        checkpoint when it has one. Returns (model, the set of heads loaded: 'mlm', 'nsp')."""
        model = cls(BertModel.from_pretrained(name_or_path, **overrides), nsp)
        ckpt = resolve_pretrained(name_or_path).require("weights")
        state = {k.removeprefix("bert."): v for k, v in read_state_dict(ckpt.weights).items()}
        for legacy, new in ((".gamma", ".weight"), (".beta", ".bias")):  # old TF-converted names
            state = {k.replace("LayerNorm" + legacy, "LayerNorm" + new): v for k, v in state.items()}
        loaded = set()
        for name, head in model.heads().items():
            names, want = HF_HEADS[name], head.state_dict()
            found = {ours: state[theirs] for ours, theirs in names.items() if theirs in state}
            if len(found) < len(names):  # a lone decoder bias (some exports keep one) is no head
                continue
            wrong = [f"{names[k]} {list(v.shape)}, the model's {list(want[k].shape)}"
                     for k, v in found.items() if v.shape != want[k].shape]
            if wrong:
                raise MinbertError(f"{ckpt.weights}: its {HEAD_WORDS[name]} head does not fit the model "
                                   f"(hidden_size {model.config.hidden_size}, vocab_size "
                                   f"{model.config.vocab_size}): " + "; ".join(wrong))
            head.load_state_dict(found)
            loaded.add(name)
        return model, loaded

    def forward(self, input_ids, attention_mask, labels, token_type_ids=None):
        """Predictions of a batch. Only chosen positions (labels not IGNORE) reach the vocabulary-sized
        decoder: with 15% chosen that is most of the head's cost saved."""
        out = self.bert(input_ids, attention_mask, token_type_ids)
        chosen = labels != IGNORE
        logits = self.head(out["last_hidden_state"][chosen], self.bert.word_embedding.weight)
        gold = labels[chosen]
        # A batch of short sentences can have no chosen token at all: its loss is 0 (nothing to predict), not
        # the NaN a mean over no elements would be, which would read as a diverged run.
        loss = F.cross_entropy(logits.float(), gold, reduction="sum") / max(gold.numel(), 1)
        next_logits = self.nsp(out["pooler_output"]) if self.nsp is not None else None
        return Predictions(loss, logits, gold, next_logits)

    def checkpoint_tensors(self):
        """Every tensor to write, under the names BertForPreTraining saves (base_bert's tables), so that the folder
        loads as --pretrained (the encoder, and the heads through from_pretrained above) and in HF transformers."""
        out = {ours_to_hf(k): v.detach().contiguous() for k, v in self.bert.state_dict().items()}
        for name, head in self.heads().items():
            out.update({HF_HEADS[name][k]: v.detach().contiguous() for k, v in head.state_dict().items()})
        return out
