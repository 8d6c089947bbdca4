"""Further pretraining of any --pretrained checkpoint on the task text (handout 5.3, "Additional
Pretraining"): masked language modelling, and with --nsp next-sentence prediction too (the masking and
heads are in tasks/mlm.py, the sentence pairs in tasks/nsp.py), for pretrain.py.

The text (--corpus) is every training sentence of SST, CFIMDB, Quora and STS (both sentences of a pair),
without repeats; CFIMDB's training reviews split into sentences; the sonnets' lines; or the lines of
--texts FILE. With --nsp the examples are pairs `[CLS] A [SEP] B [SEP]` of spans of consecutive sentences,
built from documents as BERT's pretraining data is (tasks/nsp.py): the reviews, the sonnets, or --texts'
groups of lines between blank lines (the task sentences are no documents). A random 5% of the sentences is
held out (with --nsp, 5% of the documents, whole, and at least 2): masked-token accuracy and loss on it
(masked the same way every time), and with --nsp the next-sentence accuracy on the unmasked pairs, are
printed before training and after each epoch. --out is the run folder: the epoch protocol (training/fit.py)
keeps its checkpoints and log there, so --resume continues an interrupted run exactly, and at the end it
becomes a checkpoint folder (config.json, vocab.txt, model.safetensors, with the heads beside the encoder)
holding the epoch with the best held-out masked-token accuracy.
"""
import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tqdm.auto import tqdm

from datasets import TaskData, set_pad_multiple
from minbert.cli import MinbertError, main_print
from minbert.course_data import Example, Task, data_file, read_examples, read_sonnets
from minbert.files import append_jsonl, read_text, require_file, text_lines
from minbert.hub import resolve_pretrained
from minbert.objectives.losses import TermLoss
from minbert.precision import autocast
from minbert.runs.folders import open_run
from minbert.specs import ModelSpec
from minbert.tasks.mlm import HEAD_WORDS, IGNORE, BertForMaskedLM, mask_tokens
from minbert.tasks.nsp import PAIRS, segment_pairs, split_documents, split_sentences
from minbert.training.fit import Pipeline, fit
from minbert.training.trainer import build_trainer
from tokenizer import BertTokenizer
from utils import maybe_compile, seed_everything, to_device

TEXT_TASKS = ("sst", "cfimdb", "quora", "sts")


def read_documents(settings):
    """The text as documents, each a list of its sentences in order (module docstring): --texts' groups of
    lines between blank lines, or --corpus's; the task sentences are one-sentence documents."""
    if settings.texts:
        path = Path(settings.texts)
        require_file(path, f"--texts {path}", "text file")
        text = read_text(path, "--texts file (plain text, one sentence a line)")
        first = next((l for l in text_lines(text) if l.strip()), "")
        columns = {c.strip().lower() for c in first.split("\t")}
        if "id" in columns and columns & {"sentence", "sentence1"}:  # its header, ids and labels would be "text"
            raise MinbertError(f"{path}: its first line is a course data file's header ({first.strip()!r}): "
                               "--texts takes plain text, one sentence a line; to pretrain on the course's "
                               "sentences, leave --texts out (--corpus picks them)")
        documents = [[]]
        for line in text_lines(text):
            if line.strip():
                documents[-1].append(line.strip())
            else:  # a blank line ends a document
                documents.append([])
        return [d for d in documents if d]
    if settings.corpus == "cfimdb":
        return [split_sentences(e.texts[0])
                for e in read_examples(data_file(settings.data_dir, "cfimdb", "train"), "cfimdb", "train")]
    if settings.corpus == "sonnets":
        return [[line.strip() for line in text.split("\n") if line.strip()]
                for _, text in read_sonnets(Path(settings.data_dir) / "sonnets.txt")]
    return [[t.strip()] for task in TEXT_TASKS
            for e in read_examples(data_file(settings.data_dir, task, "train"), task, "train") for t in e.texts]


def corpus_inputs(settings):
    """{what: path} of the files the text is read from."""
    if settings.texts:
        return {"--texts": settings.texts}
    if settings.corpus == "sonnets":
        return {"sonnets": str(Path(settings.data_dir) / "sonnets.txt")}
    return {f"{t} train data": data_file(settings.data_dir, t, "train")
            for t in (("cfimdb",) if settings.corpus == "cfimdb" else TEXT_TASKS)}


def read_texts(settings):
    """The pretraining sentences, each once, in a fixed order."""
    texts = list(dict.fromkeys(t for doc in read_documents(settings) for t in doc if t))
    if len(texts) < 2:
        raise MinbertError(f"{settings.texts or settings.data_dir}: {len(texts)} usable "
                           "sentence(s); pretraining needs at least 2")
    return texts


def token_counts(sentences, tokenizer, chunk=4096):
    """{sentence: its number of tokens, without [CLS] and [SEP]}."""
    counts = {}
    unique = list(dict.fromkeys(sentences))
    for k in range(0, len(unique), chunk):
        part = unique[k:k + chunk]
        ids = tokenizer(part, padding=False, truncation=False, return_tensors=None)["input_ids"]
        counts.update((sentence, len(row) - 2) for sentence, row in zip(part, ids))
    return counts


def split_texts(texts, seed, held_out=0.05):
    order = np.random.default_rng(seed).permutation(len(texts))
    n_dev = max(1, int(round(held_out * len(texts))))
    return [texts[i] for i in order[n_dev:]], [texts[i] for i in order[:n_dev]]


def as_data(texts, tokenizer, max_length):
    task = Task("text", ("text",), "", "text")  # unlabelled sentences
    return TaskData([Example(str(i), (t,), None, i + 1) for i, t in enumerate(texts)], task, tokenizer,
                    max_length)


def as_pairs(pairs, tokenizer, max_length):
    """Sentence pairs [(A, B, label)] as cross-encoded pairs, '[CLS] A [SEP] B [SEP]' with token types."""
    return TaskData([Example(str(i), (a, b), label, i + 1) for i, (a, b, label) in enumerate(pairs)], PAIRS,
                    tokenizer, max_length)


def masked(batches, tokenizer, vocab_size, mask_prob, generator):
    """Each batch with its input corrupted by the MLM rule and the chosen tokens as labels (a pair's
    next-sentence label moves to 'next_labels')."""
    specials = torch.tensor([tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id])
    mask_id = tokenizer.vocab["[MASK]"]
    for b in batches:
        if "labels" in b:
            b["next_labels"] = b.pop("labels")
        ids = b["x"]["input_ids"]
        inputs, labels = mask_tokens(ids, torch.isin(ids, specials), vocab_size, mask_id, mask_prob,
                                     generator)
        b["x"]["input_ids"], b["labels"] = inputs, labels
        yield b


def predict(model, batch):
    """The model's Predictions (tasks/mlm.py) of a masked batch."""
    x = batch["x"]
    return model(x["input_ids"], x["attention_mask"], batch["labels"], x["token_type_ids"])


class PretrainLoss(TermLoss):
    """The masked-LM loss of a batch, plus `nsp` times the next-sentence cross-entropy (each term's mean in
    the log) with --nsp, as the Trainer takes a loss."""

    def __init__(self, nsp=0.0):
        super().__init__()
        self.nsp = nsp

    def forward(self, model, batch):
        out = predict(model, batch)
        if not self.nsp:
            return out.loss
        nsp = F.cross_entropy(out.next_logits.float(), batch["next_labels"])
        return self.track("mlm", out.loss) + self.nsp * self.track("nsp", nsp)


# Held-out masked tokens below which the start line says the best epoch is chosen on little evidence: at 100, one
# token more or less right moves the accuracy by a point.
FEW_SCORED = 100


def held_out_batches(data, tokenizer, vocab_size, settings):
    """The held-out text's batches, masked the same way every time (one fixed seed)."""
    g = torch.Generator().manual_seed(settings.recipe.seed + 1)
    return masked(data.batches(64, shuffle=False), tokenizer, vocab_size, settings.mask_prob, g)


@torch.inference_mode()
def evaluate(model, data, tokenizer, settings, batches=None):
    """Masked-token accuracy and mean loss on the held-out text, masked with one fixed seed (`batches`, when the
    caller keeps them masked already: held_out_batches); with --nsp the next-sentence accuracy and mean loss
    too, on the pairs as they are (no token masked: the task itself, not the task on corrupted text)."""
    model.eval()
    device, amp = settings.runtime.device, settings.runtime.amp
    loss_sum, right, n = 0.0, 0, 0
    total = -(-len(data) // 64)
    batches = batches if batches is not None else held_out_batches(data, tokenizer, model.config.vocab_size,
                                                                  settings)
    for b in tqdm(batches, total=total, desc="held-out", disable=None, leave=False):
        b = to_device(b, device)
        with autocast(device, amp):
            out = predict(model, b)
        right += int((out.logits.argmax(-1) == out.gold).sum())
        loss_sum += float(out.loss) * len(out.gold)
        n += len(out.gold)
    scores = {"masked_acc": right / max(n, 1), "masked_loss": loss_sum / max(n, 1), "masked_tokens": n}
    if model.nsp is not None:
        nsp_sum, nsp_right = 0.0, 0
        for b in data.batches(64, shuffle=False):
            b = to_device(b, device)
            x, gold = b["x"], b["labels"]
            with autocast(device, amp):
                out = model(x["input_ids"], x["attention_mask"], torch.full_like(x["input_ids"], IGNORE),
                            x["token_type_ids"])
            nsp_right += int((out.next_logits.argmax(-1) == gold).sum())
            nsp_sum += float(F.cross_entropy(out.next_logits.float(), gold, reduction="sum"))
        scores.update(nsp_acc=nsp_right / len(data), nsp_loss=nsp_sum / len(data))
    return scores


def write_folder(model, out, pretrained, source):
    """config.json and vocab.txt of the source checkpoint, and the trained weights, into the run folder `out`
    (which open_run made from --out, or under runs/ without it)."""
    out = Path(out)
    tensors = model.checkpoint_tensors()
    if source.folder.resolve() != out.resolve():
        config = json.loads(source.config.read_text())
        config["minbert_pretrained_from"] = str(pretrained)
        # what the weights hold, for HF's Auto classes: the source's own entry may name other heads (or none)
        nsp = any("seq_relationship" in name for name in tensors)
        config["architectures"] = ["BertForPreTraining" if nsp else "BertForMaskedLM"]
        (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        shutil.copyfile(source.vocab, out / "vocab.txt")
    tmp = out / "model.safetensors.tmp"
    save_file(tensors, str(tmp), metadata={"format": "pt"})
    tmp.replace(out / "model.safetensors")


class PretrainPipeline(Pipeline):
    """Masked-LM pretraining for training/fit.py: the held-out masked-token accuracy is its dev score."""
    kind, score_name = "pretrain", "held-out masked-token accuracy"

    def __init__(self, settings):
        runtime = settings.runtime
        self.settings = settings
        self.file_stem = "pretrain"
        self.inputs = corpus_inputs(settings)
        self.source = resolve_pretrained(settings.pretrained).require("config", "vocab", "weights")
        self.tokenizer = BertTokenizer.from_pretrained(settings.pretrained)
        if "[MASK]" not in self.tokenizer.vocab:
            raise MinbertError(f"{self.source.vocab}: the vocabulary has no [MASK] token")
        if settings.nsp:
            where = settings.texts or ", ".join(str(p) for p in self.inputs.values())
            docs = split_documents(read_documents(settings), settings.recipe.seed, where)
            length = token_counts([x for part in docs for doc in part for x in doc], self.tokenizer)
            # A and B fill what [CLS] A [SEP] B [SEP] leaves of --max_length
            train, dev = (segment_pairs(part, settings.recipe.seed, length.__getitem__, max(settings.max_length - 3, 2))
                          for part in docs)
            self.train, self.dev = (as_pairs(p, self.tokenizer, settings.max_length) for p in (train, dev))
        else:
            train, dev = split_texts(read_texts(settings), settings.recipe.seed)
            self.train, self.dev = (as_data(t, self.tokenizer, settings.max_length) for t in (train, dev))
        set_pad_multiple({"train": self.train, "dev": self.dev}, runtime.pad_multiple)
        # [CLS] and [SEP] (twice in a pair) are never masked: what is left can be
        maskable = int(self.train.lengths.sum()) - (3 if settings.nsp else 2) * len(self.train)
        if maskable * settings.mask_prob < 1:  # an epoch would mask no token as often as not: its loss undefined
            raise MinbertError(f"the training text holds {maskable} maskable token(s): at --mask_prob "
                               f"{settings.mask_prob:g} an epoch masks {maskable * settings.mask_prob:.2g} of them on "
                               "average, so its training loss would mostly be undefined (shown as 0): give more "
                               "text or a higher --mask_prob")
        self.model, self.loaded = BertForMaskedLM.from_pretrained(
            settings.pretrained, nsp=settings.nsp > 0, attn_impl=runtime.attn, fast_dropout=runtime.fast_dropout)
        maybe_compile(self.model.to(runtime.device), runtime.compile)
        # masked once: every evaluation scores the same held-out tokens
        self.held_out = list(held_out_batches(self.dev, self.tokenizer, self.model.config.vocab_size, settings))
        scored = sum(int((b["labels"] != IGNORE).sum()) for b in self.held_out)
        if not scored:  # its accuracy and loss would be undefined, and every epoch would tie with the first
            raise MinbertError(f"the {len(self.dev)} held-out {'pairs' if settings.nsp else 'sentences'} get no "
                               f"masked token at --mask_prob {settings.mask_prob:g}, so the held-out accuracy that "
                               "picks the best epoch is undefined: give more text (5% of it is held out) or a higher "
                               "--mask_prob")
        if scored < FEW_SCORED:
            main_print(f"note: the held-out text holds {scored} masked token(s), so its accuracy moves in steps of "
                       f"{1 / scored:.2f} and the best epoch is picked on little evidence: give more text for a "
                       "steadier choice")
        self.spec = ModelSpec(pipeline="pretrain", pretrained=str(settings.pretrained), fine_tune_mode="full-model",
                              max_length=settings.max_length)
        self.per_epoch = -(-len(self.train) // settings.batch_size)
        self.total = min(settings.recipe.epochs * self.per_epoch, settings.max_steps or float("inf"))
        self.done = 0  # optimizer steps planned so far (a resumed run takes it from the checkpoint)
        self.loss = PretrainLoss(settings.nsp)

    def batches(self, epoch):
        settings = self.settings
        n = min(self.per_epoch, self.total - self.done)
        seed = settings.recipe.seed * 1000 + epoch
        g = torch.Generator().manual_seed(seed)
        batches = masked(self.train.batches(settings.batch_size, True, seed, settings.bucket),
                         self.tokenizer, self.model.config.vocab_size, settings.mask_prob, g)
        self.done += n
        return itertools.islice(batches, n), n, {"total_steps": self.done}

    def evaluate(self):
        scores = evaluate(self.model, self.dev, self.tokenizer, self.settings, self.held_out)
        return scores, scores["masked_acc"]

    def describe(self, s):
        nsp = (f"; next-sentence accuracy {s['nsp_acc']:.4f}, loss {s['nsp_loss']:.4f}" if "nsp_acc" in s
               else "")
        return f"held-out masked-token accuracy {s['masked_acc']:.4f}, loss {s['masked_loss']:.4f}{nsp}"

    def state_dict(self):
        return {"done": self.done}

    def load_state_dict(self, state):
        self.done = state["done"]

    def write_outputs(self, files, best):
        write_folder(self.model, files.folder, self.settings.pretrained, self.source)
        print(f"pretrained checkpoint: {files.folder} (config.json, vocab.txt, model.safetensors from epoch "
              f"{best['epoch']}; log {files.log.name}); use it with --pretrained {files.folder}")
        return files.folder, []


def run_pretrain(settings):
    """pretrain.py: train in --out (the run folder) and turn it into a checkpoint folder at the end."""
    with open_run("pretrain", ["pretrain"], run_dir=settings.out, resume=settings.run.resume,
                  flag="--out") as run:
        return pretrain(settings, run)


def pretrain(settings, run):
    """Train in `run`'s folder (--out) and turn it into a checkpoint folder at the end."""
    files = run.files("pretrain")
    seed_everything(settings.recipe.seed)
    pipeline = PretrainPipeline(settings)
    trainer = build_trainer(pipeline.model, pipeline.loss, settings.recipe, settings.runtime, pipeline.total, epochs=1)
    heads = [f"{HEAD_WORDS[name]} head " + ("from the checkpoint" if name in pipeline.loaded
                                             else "fresh (the checkpoint has none)")
             for name in pipeline.model.heads()]
    held = (f"{len(pipeline.dev)} held out, {float(pipeline.dev.labels.float().mean()):.0%} of them NotNext: what "
            "always answering NotNext scores" if settings.nsp else f"{len(pipeline.dev)} held out")
    print(f"pretrain: {len(pipeline.train)} {'pairs of spans' if settings.nsp else 'sentences'} "
          f"({held}), {pipeline.per_epoch} batches an epoch, {pipeline.total} steps; "
          f"{', '.join(heads)}; {settings.recipe.lr_why}; {settings.pretrained} on {settings.runtime.device}")
    # a new run (or one killed before its first epoch ended): start its log afresh
    if not files.last.exists():
        files.log.unlink(missing_ok=True)
        before, _ = pipeline.evaluate()
        print(f"before training: {pipeline.describe(before)}")
        append_jsonl(files.log, {"run": run.name, "pipeline": "pretrain", "model": "pretrain", "epoch": -1,
                                 "dev": before, "dev_score": before["masked_acc"],
                                 "score_name": pipeline.score_name})
    return fit(pipeline, trainer, run, settings)
