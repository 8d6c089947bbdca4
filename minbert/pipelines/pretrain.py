"""Further masked-LM pretraining of any --pretrained checkpoint on the task text (handout 5.3, "Additional
Pretraining"; the masking and head are in tasks/mlm.py), for pretrain.py.

The text is every training sentence of SST, CFIMDB, Quora and STS (both sentences of a pair), without
repeats, or one sentence per line of --texts FILE. A random 5% is held out: masked-token accuracy and
loss on it (masked the same way every time) are printed before training and after each epoch. --out is
the run folder: the epoch protocol (training/fit.py) keeps its checkpoints and log there, so --resume
continues an interrupted run exactly, and at the end it becomes a checkpoint folder (config.json,
vocab.txt, model.safetensors, with the MLM head beside the encoder) holding the epoch with the best
held-out masked-token accuracy.
"""
import itertools
import json
import shutil
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file
from tqdm.auto import tqdm

from datasets import TaskData, set_pad_multiple
from minbert.course_data import Example, Task, data_file, read_examples
from minbert.files import append_jsonl, require_file, text_lines
from minbert.hub import resolve_pretrained
from minbert.objectives.losses import TermLoss
from minbert.precision import autocast
from minbert.runs.folders import open_run
from minbert.specs import ModelSpec
from minbert.tasks.mlm import BertForMaskedLM, mask_tokens
from minbert.training.fit import Pipeline, fit
from minbert.training.trainer import build_trainer
from tokenizer import BertTokenizer
from utils import MinbertError, maybe_compile, seed_everything, to_device

TEXT_TASKS = ("sst", "cfimdb", "quora", "sts")


def read_texts(settings):
    """The pretraining sentences, each once, in a fixed order."""
    s = settings
    if s.texts:
        path = Path(s.texts)
        require_file(path, f"--texts {path}", "text file")
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8-sig")  # -sig: a byte-order mark (Excel's "CSV UTF-8") is no text
        except UnicodeDecodeError as e:
            line = raw[:e.start].count(b"\n") + 1
            raise MinbertError(f"{path}: line {line}: byte 0x{raw[e.start]:02X} is not "
                               f"UTF-8 text (--texts takes a text file, one sentence per line)") from None
        texts = [line.strip() for line in text_lines(text)]
    else:
        texts = [t.strip() for task in TEXT_TASKS
                 for e in read_examples(data_file(s.data_dir, task, "train"), task, "train")
                 for t in e.texts]
    texts = list(dict.fromkeys(t for t in texts if t))
    if len(texts) < 2:
        raise MinbertError(f"{s.texts or s.data_dir}: {len(texts)} usable "
                           "sentence(s); pretraining needs at least 2")
    return texts


def split_texts(texts, seed, held_out=0.05):
    order = np.random.default_rng(seed).permutation(len(texts))
    n_dev = max(1, int(round(held_out * len(texts))))
    return [texts[i] for i in order[n_dev:]], [texts[i] for i in order[:n_dev]]


def as_data(texts, tokenizer, max_length):
    task = Task("text", ("text",), "", "text")  # unlabelled sentences
    return TaskData([Example(str(i), (t,), None, i + 1) for i, t in enumerate(texts)], task, tokenizer,
                    max_length)


def masked(batches, tokenizer, vocab_size, mask_prob, generator):
    """Each batch with its input corrupted by the MLM rule and the chosen tokens as labels."""
    specials = torch.tensor([tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id])
    mask_id = tokenizer.vocab["[MASK]"]
    for b in batches:
        ids = b["x"]["input_ids"]
        inputs, labels = mask_tokens(ids, torch.isin(ids, specials), vocab_size, mask_id, mask_prob,
                                     generator)
        b["x"]["input_ids"], b["labels"] = inputs, labels
        yield b


class MaskedLMLoss(TermLoss):
    """The masked-LM loss of a batch (tasks/mlm.py), as the Trainer takes a loss."""

    def forward(self, model, batch):
        return model(batch["x"]["input_ids"], batch["x"]["attention_mask"], batch["labels"])[0]


@torch.inference_mode()
def evaluate(model, data, tokenizer, settings):
    """Masked-token accuracy and mean loss on the held-out text, masked with one fixed seed."""
    model.eval()
    device, amp = settings.runtime.device, settings.runtime.amp
    g = torch.Generator().manual_seed(settings.recipe.seed + 1)
    loss_sum, right, n = 0.0, 0, 0
    total = -(-len(data) // 64)
    batches = masked(data.batches(64, shuffle=False), tokenizer, model.config.vocab_size, settings.mask_prob,
                     g)
    for b in tqdm(batches, total=total, desc="held-out", disable=None, leave=False):
        b = to_device(b, device)
        with autocast(device, amp):
            loss, logits, gold = model(b["x"]["input_ids"], b["x"]["attention_mask"], b["labels"])
        right += int((logits.argmax(-1) == gold).sum())
        loss_sum += float(loss) * len(gold)
        n += len(gold)
    return {"masked_acc": right / max(n, 1), "masked_loss": loss_sum / max(n, 1), "masked_tokens": n}


def write_folder(model, settings, source):
    """config.json and vocab.txt of the source checkpoint, and the trained weights, into --out."""
    out = Path(settings.out)
    out.mkdir(parents=True, exist_ok=True)
    if source.folder.resolve() != out.resolve():
        config = json.loads(source.config.read_text())
        config["minbert_pretrained_from"] = str(settings.pretrained)
        (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        shutil.copyfile(source.vocab, out / "vocab.txt")
    tmp = out / "model.safetensors.tmp"
    save_file(model.checkpoint_tensors(), str(tmp), metadata={"format": "pt"})
    tmp.replace(out / "model.safetensors")


class PretrainPipeline(Pipeline):
    """Masked-LM pretraining for training/fit.py: the held-out masked-token accuracy is its dev score."""
    kind, score_name = "pretrain", "held-out masked-token accuracy"

    def __init__(self, settings):
        s, rt = settings, settings.runtime
        self.settings = s
        self.file_stem = "pretrain"
        self.inputs = ({"--texts": s.texts} if s.texts
                       else {f"{t} train data": data_file(s.data_dir, t, "train") for t in TEXT_TASKS})
        self.source = resolve_pretrained(s.pretrained).require("config", "vocab", "weights")
        self.tokenizer = BertTokenizer.from_pretrained(s.pretrained)
        if "[MASK]" not in self.tokenizer.vocab:
            raise MinbertError(f"{self.source.vocab}: the vocabulary has no [MASK] token")
        train_texts, dev_texts = split_texts(read_texts(s), s.recipe.seed)
        self.train = as_data(train_texts, self.tokenizer, s.max_length)
        self.dev = as_data(dev_texts, self.tokenizer, s.max_length)
        set_pad_multiple({"train": self.train, "dev": self.dev}, rt.pad_multiple)
        self.model, self.had_head = BertForMaskedLM.from_pretrained(s.pretrained, attn_impl=rt.attn,
                                                                    fast_dropout=rt.fast_dropout)
        maybe_compile(self.model.to(rt.device), rt.compile)
        self.spec = ModelSpec(pipeline="pretrain", pretrained=str(s.pretrained), fine_tune_mode="full-model",
                              max_length=s.max_length)
        self.per_epoch = -(-len(self.train) // s.batch_size)
        self.total = min(s.recipe.epochs * self.per_epoch, s.max_steps or float("inf"))
        self.done = 0  # optimizer steps planned so far (a resumed run takes it from the checkpoint)
        self.loss = MaskedLMLoss()

    def batches(self, epoch):
        s = self.settings
        n = min(self.per_epoch, self.total - self.done)
        g = torch.Generator().manual_seed(s.recipe.seed * 1000 + epoch)
        batches = masked(self.train.batches(s.batch_size, True, s.recipe.seed * 1000 + epoch, s.bucket),
                         self.tokenizer, self.model.config.vocab_size, s.mask_prob, g)
        self.done += n
        return itertools.islice(batches, n), n, {"total_steps": self.done}

    def evaluate(self):
        scores = evaluate(self.model, self.dev, self.tokenizer, self.settings)
        return scores, scores["masked_acc"]

    def describe(self, s):
        return f"held-out masked-token accuracy {s['masked_acc']:.4f}, loss {s['masked_loss']:.4f}"

    def state_dict(self):
        return {"done": self.done}

    def load_state_dict(self, state):
        self.done = state["done"]

    def write_outputs(self, files, best):
        write_folder(self.model, self.settings, self.source)
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
    s = settings
    files = run.files("pretrain")
    seed_everything(s.recipe.seed)
    pipeline = PretrainPipeline(s)
    trainer = build_trainer(pipeline.model, pipeline.loss, s.recipe, s.runtime, pipeline.total, epochs=1)
    print(f"pretrain: {len(pipeline.train)} sentences ({len(pipeline.dev)} held out), {pipeline.per_epoch} "
          f"batches an epoch, {pipeline.total} steps; MLM head "
          f"{'from the checkpoint' if pipeline.had_head else 'fresh (the checkpoint has none)'}; "
          f"{s.pretrained} on {s.runtime.device}")
    # a new run (or one killed before its first epoch ended): start its log afresh
    if not files.last.exists():
        files.log.unlink(missing_ok=True)
        before, _ = pipeline.evaluate()
        print("before training: held-out masked-token accuracy "
              f"{before['masked_acc']:.4f}, loss {before['masked_loss']:.4f}")
        append_jsonl(files.log, {"run": run.name, "pipeline": "pretrain", "model": "pretrain", "epoch": -1,
                                 "dev": before, "dev_score": before["masked_acc"],
                                 "score_name": pipeline.score_name})
    return fit(pipeline, trainer, run, s)
