"""Further masked-LM pretraining of any --pretrained checkpoint on the task text (handout 5.3, "Additional
Pretraining"; the masking and head are in mlm.py).

    python pretrain.py --pretrained all-minilm-l6-v2 --out pretrained/minilm-tasks --epochs 3
    python multitask_classifier.py --pretrained pretrained/minilm-tasks ...

The text is every training sentence of SST, CFIMDB, Quora and STS (both sentences of a pair), without
repeats, or one sentence per line of --texts FILE. A random 5% is held out: masked-token accuracy and
loss on it (masked the same way every time) are printed before training and after each epoch. --out is
the run folder: the epoch protocol (trainer.fit) keeps its checkpoints and log there, so --resume
continues an interrupted run exactly, and at the end it becomes a checkpoint folder (config.json,
vocab.txt, model.safetensors, with the MLM head beside the encoder) holding the epoch with the best
held-out masked-token accuracy. The flags are declared in flags.py (pretrain_parser).
"""
import itertools
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from tqdm.auto import tqdm

from checkpoint import ModelSpec
from datasets import Example, TaskData, data_file, read_examples, set_pad_multiple, setup_shapes
from flags import check_max_length, parse_pretrain, run_defining
from hub import resolve_pretrained
from mlm import BertForMaskedLM, mask_tokens
from precision import autocast, setup_precision
from runs import open_run
from tokenizer import BertTokenizer
from trainer import Pipeline, build_trainer, fit
from utils import MinbertError, append_jsonl, get_device, main_guard, maybe_compile, seed_everything, to_device

TEXT_TASKS = ("sst", "cfimdb", "quora", "sts")


def read_texts(args):
    """The pretraining sentences, each once, in a fixed order."""
    if args.texts:
        path = Path(args.texts)
        if not path.is_file():
            raise MinbertError(f"{path}: --texts file not found")
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8-sig")  # -sig: a byte-order mark (Excel's "CSV UTF-8") is no text
        except UnicodeDecodeError as e:
            line = raw[:e.start].count(b"\n") + 1
            raise MinbertError(f"{path}: line {line}: byte 0x{raw[e.start]:02X} is not "
                               f"UTF-8 text (--texts takes a text file, one sentence per line)") from None
        texts = [line.strip() for line in text.splitlines()]
    else:
        texts = [t.strip() for task in TEXT_TASKS
                 for e in read_examples(data_file(args.data_dir, task, "train"), task, "train")
                 for t in e.texts]
    texts = list(dict.fromkeys(t for t in texts if t))
    if len(texts) < 2:
        raise MinbertError(f"{args.texts or args.data_dir}: {len(texts)} usable sentence(s); pretraining needs at least 2")
    return texts


def split_texts(texts, seed, held_out=0.05):
    order = np.random.default_rng(seed).permutation(len(texts))
    n_dev = max(1, int(round(held_out * len(texts))))
    return [texts[i] for i in order[n_dev:]], [texts[i] for i in order[:n_dev]]


def as_data(texts, tokenizer, max_length):
    task = SimpleNamespace(name="text", is_pair=False, kind="text")
    return TaskData([Example(str(i), (t,), None, i + 1) for i, t in enumerate(texts)], task, tokenizer, max_length)


def masked(batches, tokenizer, vocab_size, mask_prob, generator):
    """Each batch with its input corrupted by the MLM rule and the chosen tokens as labels."""
    specials = torch.tensor([tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id])
    mask_id = tokenizer.vocab["[MASK]"]
    for b in batches:
        ids = b["x"]["input_ids"]
        inputs, labels = mask_tokens(ids, torch.isin(ids, specials), vocab_size, mask_id, mask_prob, generator)
        b["x"]["input_ids"], b["labels"] = inputs, labels
        yield b


def mlm_loss(model, batch):
    return model(batch["x"]["input_ids"], batch["x"]["attention_mask"], batch["labels"])[0]


@torch.inference_mode()
def evaluate(model, data, tokenizer, args, device):
    """Masked-token accuracy and mean loss on the held-out text, masked with one fixed seed."""
    model.eval()
    g = torch.Generator().manual_seed(args.seed + 1)
    loss_sum, right, n = 0.0, 0, 0
    total = -(-len(data) // 64)
    batches = masked(data.batches(64, shuffle=False), tokenizer, model.config.vocab_size, args.mask_prob, g)
    for b in tqdm(batches, total=total, desc="held-out", disable=None, leave=False):
        b = to_device(b, device)
        with autocast(device, args.amp):
            loss, logits, gold = model(b["x"]["input_ids"], b["x"]["attention_mask"], b["labels"])
        right += int((logits.argmax(-1) == gold).sum())
        loss_sum += float(loss) * len(gold)
        n += len(gold)
    return {"masked_acc": right / max(n, 1), "masked_loss": loss_sum / max(n, 1), "masked_tokens": n}


def write_folder(model, args, source):
    """config.json and vocab.txt of the source checkpoint, and the trained weights, into --out."""
    from safetensors.torch import save_file
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if source.folder.resolve() != out.resolve():
        config = json.loads(source.config.read_text())
        config["minbert_pretrained_from"] = str(args.pretrained)
        (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        shutil.copyfile(source.vocab, out / "vocab.txt")
    tmp = out / "model.safetensors.tmp"
    save_file(model.checkpoint_tensors(), str(tmp), metadata={"format": "pt"})
    tmp.replace(out / "model.safetensors")


class PretrainPipeline(Pipeline):
    """Masked-LM pretraining for trainer.fit: the held-out masked-token accuracy is its dev score."""
    kind, score_name = "pretrain", "held-out masked-token accuracy"

    def __init__(self, args, device):
        self.args, self.device = args, device
        self.source = resolve_pretrained(args.pretrained).require("config", "vocab", "weights")
        self.tokenizer = BertTokenizer.from_pretrained(args.pretrained)
        if "[MASK]" not in self.tokenizer.vocab:
            raise MinbertError(f"{self.source.vocab}: the vocabulary has no [MASK] token")
        train_texts, dev_texts = split_texts(read_texts(args), args.seed)
        self.train = as_data(train_texts, self.tokenizer, args.max_length)
        self.dev = as_data(dev_texts, self.tokenizer, args.max_length)
        set_pad_multiple({"train": self.train, "dev": self.dev}, args.pad_multiple)
        self.model, self.had_head = BertForMaskedLM.from_pretrained(args.pretrained, attn_impl=args.attn)
        maybe_compile(self.model.to(device), args.compile)
        self.spec = ModelSpec(pipeline="pretrain", pretrained=str(args.pretrained), fine_tune_mode="full-model",
                              max_length=args.max_length)
        self.per_epoch = -(-len(self.train) // args.batch_size)
        self.total = min(args.epochs * self.per_epoch, args.max_steps or float("inf"))
        self.done = 0  # optimizer steps planned so far (a resumed run takes it from the checkpoint)
        self.loss = mlm_loss

    def batches(self, epoch):
        a = self.args
        n = min(self.per_epoch, self.total - self.done)
        g = torch.Generator().manual_seed(a.seed * 1000 + epoch)
        batches = masked(self.train.batches(a.batch_size, True, a.seed * 1000 + epoch, a.bucket),
                         self.tokenizer, self.model.config.vocab_size, a.mask_prob, g)
        self.done += n
        return itertools.islice(batches, n), n, {"total_steps": self.done}

    def evaluate(self):
        scores = evaluate(self.model, self.dev, self.tokenizer, self.args, self.device)
        return scores, scores["masked_acc"]

    def describe(self, s):
        return f"held-out masked-token accuracy {s['masked_acc']:.4f}, loss {s['masked_loss']:.4f}"

    def state_dict(self):
        return {"done": self.done}

    def load_state_dict(self, state):
        self.done = state["done"]

    def write_outputs(self, files, best):
        write_folder(self.model, self.args, self.source)
        print(f"pretrained checkpoint: {files.folder} (config.json, vocab.txt, model.safetensors from epoch "
              f"{best['epoch']}; log {files.log.name}); use it with --pretrained {files.folder}")
        return files.folder, []


def main(argv=None):
    args = parse_pretrain(argv)
    device = get_device(args.use_gpu)
    setup_precision(args, device)
    setup_shapes(args, device)
    check_max_length(args.max_length, args.pretrained)
    with open_run("pretrain", ["pretrain"], run_dir=args.out, resume=args.resume, flag="--out") as run:
        return pretrain(args, run, device)


def pretrain(args, run, device):
    """Train in `run`'s folder (--out) and turn it into a checkpoint folder at the end."""
    files = run.files("pretrain")
    seed_everything(args.seed)
    pipeline = PretrainPipeline(args, device)
    trainer = build_trainer(pipeline.model, args, device, pipeline.total, epochs=1)
    print(f"pretrain: {len(pipeline.train)} sentences ({len(pipeline.dev)} held out), {pipeline.per_epoch} batches an "
          f"epoch, {pipeline.total} steps; MLM head {'from the checkpoint' if pipeline.had_head else 'fresh (the checkpoint has none)'}; "
          f"{args.pretrained} on {device}")
    if not files.last.exists():  # a new run (or one killed before its first epoch ended): start its log afresh
        files.log.unlink(missing_ok=True)
        before, _ = pipeline.evaluate()
        print(f"before training: held-out masked-token accuracy {before['masked_acc']:.4f}, loss {before['masked_loss']:.4f}")
        append_jsonl(files.log, {"run": run.name, "pipeline": "pretrain", "model": "pretrain", "epoch": -1,
                                 "dev": before, "dev_score": before["masked_acc"], "score_name": pipeline.score_name})
    inputs = {"--texts": args.texts} if args.texts else {f"{t} train data": data_file(args.data_dir, t, "train")
                                                         for t in TEXT_TASKS}
    return fit(pipeline, trainer, files, run.name, args.epochs, resume=args.resume, flags=run_defining(args, inputs),
               continue_hint="the same command plus --resume", tensorboard=args.tensorboard)


if __name__ == "__main__":
    main_guard(main)
