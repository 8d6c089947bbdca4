"""The Part 2 model: one shared BERT, a head per task (handout section 5.2's MultitaskBERT).

multitask_classifier.py trains and tests it (pipelines/multitask.py), ensemble.py and tools/ rebuild saved
models with `load_multitask`; the script re-exports the class, so `from multitask_classifier import
MultitaskBERT` works as the handout writes it.

Every task has one forward path, `task_forward(task, batch)`, which training (objectives/losses.py
MultitaskLoss), evaluation (evaluation.model_eval_multitask) and the handout's `predict_sentiment`,
`predict_paraphrase` and `predict_similarity` all call. Pairs are cross-encoded ('[CLS] a [SEP] b [SEP]' in
one input) or siamese (two sentence embeddings u, v: paraphrase from [u, v, |u-v|, u*v], similarity 5
ReLU(cos(u, v))), per task as spec.pair_encoding says (datasets.task_encoding).
"""
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from bert import BertModel
from datasets import join_pair, task_encoding
from minbert.cli import MinbertError, flag_spelling
from minbert.course_data import MULTITASK
from minbert.files import plain
from minbert.finetuning.modes import prepare_backbone
from minbert.finetuning.pals import PALs
from minbert.runs.checkpoint import load_checkpoint, load_trainable_state, read_spec
from minbert.specs import ModelSpec
from minbert.tasks.extra import EXTRA_TASKS

N_SENTIMENT = 5


@dataclass
class TaskOutput:
    output: torch.Tensor        # what the task is scored on: SST logits [B, 5], Quora logit [B], STS 0..5 [B]
    # STS: what the similarity losses train, cos(u, v) (siamese) or in (0, 1) (cross)
    score: torch.Tensor = None
    # sentence embeddings where the batch has them: SST's sentence, a siamese pair's first
    u: torch.Tensor = None
    v: torch.Tensor = None      # and a siamese pair's second


class MultitaskBERT(nn.Module):
    """One shared BERT, a head per task, built from a specs.ModelSpec (`config`, the starter's name for it)."""

    @property
    def backbone(self):
        """The pretrained network inside (the backbone contract: bert.py BertModel.layers, .embeddings)."""
        return self.bert

    def __init__(self, config: ModelSpec, attn="sdpa", fast_dropout=True):
        super().__init__()
        spec = self.spec = config
        self.bert = BertModel.from_pretrained(spec.pretrained, attn_impl=attn, fast_dropout=fast_dropout)
        prepare_backbone(self.bert, spec)
        self.pals = PALs(self.bert.config, MULTITASK, spec.pals_dim) if spec.pals else None
        if self.pals is not None:
            self.pals.attach(self.bert)
        self.encoding = {t: task_encoding(spec.pair_encoding, t) for t in ("quora", "sts")}
        H = self.bert.config.hidden_size
        drop = dict(zip(MULTITASK, spec.dropout))
        # --shared_head: one hidden layer that the heads reading a pooled vector (SST's, cross-encoded pairs')
        # share, each task keeping its own output layer ("Sharing weights", handout 5.3)
        self.shared = nn.Sequential(nn.Linear(H, spec.shared_head), nn.GELU()) if spec.shared_head else None
        W = spec.shared_head or H  # the width a head reads
        self.sst_head = nn.Sequential(nn.Dropout(drop["sst"]), nn.Linear(W, N_SENTIMENT))
        # --siamese_proj: one linear map shared by both sentences, before the cosine and the pair features
        self.proj = nn.Linear(H, spec.siamese_proj) if spec.siamese_proj else None
        pair_width = W if self.encoding["quora"] == "cross" else 4 * (spec.siamese_proj or H)
        self.para_head = nn.Sequential(nn.Dropout(drop["quora"]), nn.Linear(pair_width, 1))
        # Siamese similarity is the embeddings' cosine itself (no parameters), as Sentence-BERT does it.
        self.sts_head = (nn.Sequential(nn.Dropout(drop["sts"]), nn.Linear(W, 1))
                         if self.encoding["sts"] == "cross" else None)
        # --extra_task: a head per additional data set, on cross-encoded pairs, with the Quora head's dropout
        self.extra_heads = nn.ModuleDict({name: nn.Sequential(nn.Dropout(drop["quora"]),
                                                              nn.Linear(W, EXTRA_TASKS[name].num_labels or 1))
                                          for name in spec.extra_tasks})

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        """A sentence (or cross-encoded pair) embedding: [CLS] state, pooler output, or masked mean."""
        out = self.bert(input_ids, attention_mask, token_type_ids)
        if self.spec.pooling == "pooler":
            return out["pooler_output"]
        hidden = out["last_hidden_state"]
        if self.spec.pooling == "cls":
            return hidden[:, 0]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)

    def embed_sentence(self, input_ids, attention_mask):
        """A sentence's embedding for cosine and pair features: pooled, then --siamese_proj."""
        pooled = self(input_ids, attention_mask)
        return pooled if self.proj is None else self.proj(pooled)

    def head_input(self, pooled):
        """What a task head reads: the pooled vector, through the shared hidden layer when there is one."""
        return pooled if self.shared is None else self.shared(pooled)

    def task_forward(self, task, batch):
        """The one forward path of `task` on a batch ({'x': inputs} or siamese {'a': ..., 'b': ...})."""
        if self.pals is not None:
            self.pals.task = task  # route this forward through the task's PALs
        if task == "sst":
            pooled = self(**batch["x"])
            return TaskOutput(self.sst_head(self.head_input(pooled)),
                              u=pooled if self.proj is None else self.proj(pooled))
        if task in self.extra_heads:
            out = self.extra_heads[task](self.head_input(self(**batch["x"])))
            kind = EXTRA_TASKS[task]
            if kind.kind == "class":
                return TaskOutput(out)
            lo, hi = kind.label_range  # a score in its range, as the cross-encoded STS head gives one
            return TaskOutput(lo + (hi - lo) * torch.sigmoid(out.squeeze(-1)))
        if self.encoding[task] == "cross":
            pooled = self.head_input(self(**batch["x"]))
            if task == "quora":
                return TaskOutput(self.para_head(pooled).squeeze(-1))
            score = torch.sigmoid(self.sts_head(pooled).squeeze(-1))
            return TaskOutput(5.0 * score, score=score)
        if "b" not in batch:
            raise ValueError("siamese pair encoding needs both sentences (input_ids_2, attention_mask_2)")
        u = self.embed_sentence(batch["a"]["input_ids"], batch["a"]["attention_mask"])
        v = self.embed_sentence(batch["b"]["input_ids"], batch["b"]["attention_mask"])
        if task == "quora":
            return TaskOutput(self.para_head(torch.cat([u, v, (u - v).abs(), u * v], dim=-1)).squeeze(-1),
                              u=u, v=v)
        score = F.cosine_similarity(u, v, dim=-1)
        return TaskOutput(5.0 * F.relu(score), score=score, u=u, v=v)

    # the handout's methods: its argument names, the same path as training
    def predict_sentiment(self, input_ids, attention_mask, token_type_ids=None):
        """Logits over the five SST classes."""
        return self.task_forward("sst", {"x": _inputs(input_ids, attention_mask, token_type_ids)}).output

    def predict_paraphrase(self, input_ids_1, attention_mask_1, input_ids_2=None, attention_mask_2=None,
                           token_type_ids=None):
        """One logit per pair (> 0 means paraphrase). The handout's call gives the two sentences apart; a
        cross-encoded pair may also come as one input in input_ids_1 with its token_type_ids."""
        return self.task_forward("quora", self._pair("quora", input_ids_1, attention_mask_1, input_ids_2,
                                                     attention_mask_2, token_type_ids)).output

    def predict_similarity(self, input_ids_1, attention_mask_1, input_ids_2=None, attention_mask_2=None,
                           token_type_ids=None):
        """Similarity on the STS scale 0..5, the pair given as predict_paraphrase takes it."""
        return self.task_forward("sts", self._pair("sts", input_ids_1, attention_mask_1, input_ids_2,
                                                   attention_mask_2, token_type_ids)).output

    def _pair(self, task, ids1, mask1, ids2, mask2, token_type_ids):
        if ids2 is None:
            return {"x": _inputs(ids1, mask1, token_type_ids)}
        if self.encoding[task] == "cross":  # two sentences, one input: the pair as training builds it
            pad_id = self.bert.config.pad_token_id
            return {"x": join_pair(ids1, mask1, ids2, mask2, self.spec.max_length, pad_id)}
        return {"a": _inputs(ids1, mask1, token_type_ids), "b": _inputs(ids2, mask2, None)}


def _inputs(input_ids, attention_mask, token_type_ids):
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}


def load_multitask(path, device="cpu", attn="sdpa", given=None):
    """The model saved in multitask checkpoint `path`, rebuilt from its own spec. `given` ({spec field:
    value}, the architecture flags the user typed) must agree with it. Returns (model, checkpoint, spec)."""
    state = load_checkpoint(path)
    spec = read_spec(state, path, "multitask")
    diff = spec.differences(given or {})
    if diff:
        raise MinbertError(f"{path}: cannot evaluate, the checkpoint comes from another configuration: "
                           + "; "
                             "".join(f"{flag_spelling(k)} {plain(s)!r} in the checkpoint, {plain(g)!r} given"
                                       for k, s, g in diff))
    model = MultitaskBERT(spec, attn).to(device)
    load_trainable_state(model, state["model"], path)
    return model, state, spec
