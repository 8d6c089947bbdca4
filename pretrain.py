"""Further masked-LM pretraining of any --pretrained checkpoint on the task text (handout 5.3, "Additional
Pretraining"; the masking and head are in mlm.py).

    python pretrain.py --pretrained all-minilm-l6-v2 --out pretrained/minilm-tasks --epochs 3
    python multitask_classifier.py --pretrained pretrained/minilm-tasks ...

The text is every training sentence of SST, CFIMDB, Quora and STS (both sentences of a pair), without
repeats, or one sentence per line of --texts FILE. A random 5% is held out: masked-token accuracy and
loss on it (masked the same way every time) are printed before training and after each epoch. Each epoch
rewrites --out as a checkpoint folder (config.json, vocab.txt, model.safetensors, with the MLM head
beside the encoder) and saves the optimizer there, so --resume continues an interrupted run.
"""
import itertools
import json
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from tqdm.auto import tqdm

from datasets import Example, TaskData, data_file, read_examples
from flags import Parser, add_speed_flags, check_max_length, fraction, nonneg_float, nonneg_int, positive_float, positive_int
from hub import resolve_pretrained
from mlm import BertForMaskedLM, mask_tokens
from precision import autocast, setup_precision
from tokenizer import BertTokenizer
from trainer import build_trainer
from utils import (MinbertError, append_jsonl, get_device, load_checkpoint, main_guard, require_same_flags, rng_state,
                   save_checkpoint, seed_everything, set_rng_state, to_device)

TEXT_TASKS = ("sst", "cfimdb", "quora", "sts")
STATE = "pretrain-state.pt"
# Flags that must agree between an interrupted run and its resumption.
RUN_DEFINING = {k: "--" + k for k in ("pretrained", "texts", "epochs", "max_steps", "lr", "batch_size", "max_length",
                                      "mask_prob", "seed", "weight_decay", "warmup_ratio", "data_dir")}


def get_args(argv=None):
    ap = Parser(description=__doc__)
    ap.add_argument("--pretrained", default="bert-base-uncased")
    ap.add_argument("--data_dir", default="data")
    ap.add_argument("--texts", default=None, help="one sentence per line, instead of the task training text")
    ap.add_argument("--out", required=True, help="the checkpoint folder to write (loadable with --pretrained OUT)")
    ap.add_argument("--epochs", type=positive_int, default=3)
    ap.add_argument("--max_steps", type=nonneg_int, default=0, help="stop after this many optimizer steps (0: no limit)")
    ap.add_argument("--lr", type=positive_float, default=5e-5)
    ap.add_argument("--batch_size", type=positive_int, default=32)
    ap.add_argument("--max_length", type=positive_int, default=128)
    ap.add_argument("--mask_prob", type=fraction, default=0.15, help="share of tokens chosen for prediction")
    ap.add_argument("--weight_decay", type=nonneg_float, default=0.01)
    ap.add_argument("--warmup_ratio", type=fraction, default=0.06)
    ap.add_argument("--seed", type=int, default=11711)
    ap.add_argument("--use_gpu", action="store_true")
    ap.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    add_speed_flags(ap)
    args = ap.parse_args(argv)
    # the shared trainer's other levers, at their plain values
    args.scheduler, args.max_grad_norm, args.llrd, args.head_lr = "linear", 1.0, 1.0, None
    return args


def read_texts(args):
    """The pretraining sentences, each once, in a fixed order."""
    if args.texts:
        path = Path(args.texts)
        if not path.is_file():
            raise MinbertError(f"{path}: --texts file not found")
        texts = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
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


def main(argv=None):
    args = get_args(argv)
    device = get_device(args.use_gpu)
    setup_precision(args, device)
    check_max_length(args.max_length, args.pretrained)
    out, state_path = Path(args.out), Path(args.out) / STATE
    if out.exists() and not out.is_dir():
        raise MinbertError(f"--out {out}: is a file; pretrain.py writes a checkpoint folder there")
    if args.resume and not state_path.is_file():
        raise MinbertError(f"--resume: {state_path} not found; no interrupted pretraining run in --out {out}")
    if not args.resume and out.is_dir() and any(out.iterdir()):
        raise MinbertError(f"--out {out}: the folder is not empty; pick another, or add --resume to continue it")
    seed_everything(args.seed)
    source = resolve_pretrained(args.pretrained).require("config", "vocab", "weights")
    tokenizer = BertTokenizer.from_pretrained(args.pretrained)
    if "[MASK]" not in tokenizer.vocab:
        raise MinbertError(f"{source.vocab}: the vocabulary has no [MASK] token")
    train_texts, dev_texts = split_texts(read_texts(args), args.seed)
    train, dev = as_data(train_texts, tokenizer, args.max_length), as_data(dev_texts, tokenizer, args.max_length)
    model, had_head = BertForMaskedLM.from_pretrained(out if args.resume else args.pretrained, attn_impl=args.attn)
    model.to(device)
    per_epoch = -(-len(train) // args.batch_size)
    steps = min(args.epochs * per_epoch, args.max_steps or float("inf"))
    trainer = build_trainer(model, SimpleNamespace(**{**vars(args), "epochs": 1}), device, steps)
    print(f"pretrain: {len(train)} sentences ({len(dev)} held out), {per_epoch} batches an epoch, {steps} steps; "
          f"MLM head {'from the checkpoint' if had_head else 'fresh (the checkpoint has none)'}; {args.pretrained} "
          f"on {device}")
    log = out / "pretrain-log.jsonl"
    start, done = 0, 0
    if args.resume:
        state = load_checkpoint(state_path)
        require_same_flags(state["args"], args, RUN_DEFINING, state_path, "cannot resume")
        trainer.optimizer.load_state_dict(state["optimizer"])
        trainer.scheduler.load_state_dict(state["scheduler"])
        set_rng_state(state["rng"])
        start, done = state["epoch"] + 1, state["steps"]
        print(f"resumed after epoch {state['epoch']} ({done} steps) from {out}")
    else:
        before = evaluate(model, dev, tokenizer, args, device)
        print(f"before training: held-out masked-token accuracy {before['masked_acc']:.4f}, loss {before['masked_loss']:.4f}")
        append_jsonl(log, {"epoch": -1, "steps": 0, **before})
    for epoch in range(start, args.epochs):
        if done >= steps:
            break
        n = min(per_epoch, steps - done)
        g = torch.Generator().manual_seed(args.seed * 1000 + epoch)
        batches = masked(train.batches(args.batch_size, True, args.seed * 1000 + epoch, args.bucket),
                         tokenizer, model.config.vocab_size, args.mask_prob, g)
        t0 = time.perf_counter()
        stats = trainer.run_epoch(itertools.islice(batches, n), mlm_loss, n, desc=f"pretrain epoch {epoch}")
        done += stats["steps"]
        scores = evaluate(model, dev, tokenizer, args, device)
        write_folder(model, args, source)
        save_checkpoint(state_path, {"optimizer": trainer.optimizer.state_dict(), "scheduler": trainer.scheduler.state_dict(),
                                     "epoch": epoch, "steps": done, "rng": rng_state(), "args": vars(args)})
        append_jsonl(log, {"epoch": epoch, "steps": done, **stats, **scores})
        print(f"epoch {epoch}: train loss {stats['train_loss']:.4f}, held-out masked-token accuracy "
              f"{scores['masked_acc']:.4f}, loss {scores['masked_loss']:.4f}, {(time.perf_counter() - t0) / 60:.1f} min, "
              f"{stats['tokens_per_s']:.0f} tokens/s; checkpoint in {out}")
    print(f"pretrained checkpoint: {out} (config.json, vocab.txt, model.safetensors; log {log.name}); "
          f"use it with --pretrained {out}")
    return out


if __name__ == "__main__":
    main_guard(main)
