"""Throughput of our BertModel: the training step the default recipe runs, a plain training step (forward,
backward, AdamW step) and inference.

    python bench.py --pretrained all-minilm-l6-v2 --data sst --batch_size 32 --compare --hf
    python bench.py --pretrained all-minilm-l6-v2 --smart_weight 0 --rdrop_weight 1   # any recipe's step
    python bench.py --config base --data synthetic --seq_len 128
    python bench.py --pretrained all-minilm-l6-v2 --fine-tune-mode lora   # or dora, last-linear-layer; --pals

Rows: `recipe` trains Part 1's classifier with the regularisers the flags ask for, taken as the pipelines
take them (default: Part 2's default recipe, R-Drop on the full model); `plain` is the same step without
them; `baseline` (--compare) has every switch off (fp32, explicit attention, no bucketing, the reference
optimizer loop); with --hf, HF transformers' BertModel on the same weights, on the same length-bucketed
batches as ours (`hf-bucketed`, what its Trainer's group_by_length gives) and on batches in random
order (`hf-random`, its default, so that row's ratio includes bucketing's gain).
Reports non-pad and padded tokens/s, ms per step, achieved
FLOP/s and MFU against the matmul peak measured on the same device, with the same thread count, in the same
run (the best of several timed matmuls after a warm-up, with its spread; only for precisions the hardware
runs natively, since an emulated bf16 peak is meaningless), and peak memory (on a GPU the allocator's peak
for each run; on the CPU the process's resident-set high-water mark, which only grows across runs).
Warm-up steps are excluded; every figure is the median over --repeats passes over the same batches.
--fine-tune-mode and --pals time our model the way those pipelines train it (adapters or PALs, only
trainable tensors in AdamW), with the optimizer state's measured size.
"""
import json
import resource
import statistics
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from bert import BertModel
from config import BertConfig
from datasets import TaskData, batch_indices, data_file, read_examples, set_pad_multiple, setup_shapes
from optimizer import AdamW
from tokenizer import BertTokenizer
from flags import DEFAULT_REGULARIZERS, Parser, add_regularizer_flags, nonneg_int, positive_int
from precision import AMP_CHOICES, autocast, cpu_capability, device_kind, native_precisions, resolve_amp
from hub import resolve_pretrained
from utils import MinbertError, get_device, main_guard, to_device

CONFIGS = {
    "base": {},
    "minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536),
    "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512),
}


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def matmul_peak(device, dtype, sizes=(1024, 2048), repeats=10, warmup=3):
    """The practical peak MFU is measured against: FLOP/s of large square matmuls, the best of `repeats`
    timed runs per size after `warmup` untimed ones (a peak taken as a median, from a cold start or at one
    unlucky size reads low and makes MFU read high). Returns {"best", "median", "worst"} in FLOP/s."""
    rates = []
    for n in sizes:
        a = torch.randn(n, n, device=device, dtype=dtype)
        b = torch.randn(n, n, device=device, dtype=dtype)
        for _ in range(warmup):
            a @ b
        for _ in range(repeats):
            sync(device)
            t0 = time.perf_counter()
            a @ b
            sync(device)
            rates.append(2 * n ** 3 / (time.perf_counter() - t0))
    return {"best": max(rates), "median": statistics.median(rates), "worst": min(rates)}


def mfu(flop_per_s, peak):
    """(MFU, note). Above 100% the peak was measured low: a measurement error, reported as such."""
    if peak is None:
        return None, "no native peak for this precision"
    value = flop_per_s / peak["best"]
    if value > 1.0:
        return None, f"measurement error: {value:.0%} of the measured peak (the peak read low)"
    return value, ""


def make_batches(args, tokenizer, bucket, seed=0):
    """Index lists of real examples (or synthetic token ids) as padded batches on the host; bucketed batches are
    padded to a multiple of --pad_multiple, as the pipelines pad them."""
    if args.data == "synthetic":
        rng = np.random.default_rng(seed)
        out = []
        for _ in range(args.warmup + args.steps):
            ids = torch.from_numpy(rng.integers(1000, 20000, size=(args.batch_size, args.seq_len)))
            ids[:, 0] = 101
            out.append({"x": {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                              "token_type_ids": torch.zeros_like(ids)}, "labels": torch.zeros(args.batch_size, dtype=torch.long)})
        return out
    task = "sst" if args.data == "sst" else "quora"
    examples = read_examples(data_file(args.data_dir, task, "train"), task, "train", log=lambda *_: None)
    data = set_pad_multiple(TaskData(examples, task, tokenizer, max_length=args.seq_len), args.pad_multiple if bucket else 0)
    idx = batch_indices(data.lengths, args.batch_size, shuffle=True, seed=seed, bucket=bucket)
    return [data.batch(i) for i in idx[:args.warmup + args.steps]]


def flops_per_batch(cfg, batch):
    """Forward FLOPs of the padded batch: 2 per weight per token for the matmuls, plus attention."""
    B, T = batch["x"]["input_ids"].shape
    H, L, I = cfg.hidden_size, cfg.num_hidden_layers, cfg.intermediate_size
    per_token = L * (2 * (4 * H * H + 2 * H * I) + 4 * T * H)  # QKVO, FFN; QK^T and AV
    return B * T * per_token


def hf_model(args, cfg):
    """The usual alternative, for reference: HF transformers' BertModel on the same weights, as most
    fine-tuning scripts run it (fp32, its default attention, torch.optim.AdamW), on our length-bucketed
    batches (what its Trainer's group_by_length gives) or on batches padded in random order. Only bench.py
    touches transformers, and only with --hf."""
    try:
        import transformers
    except ImportError:
        raise MinbertError("--hf needs the transformers package (pip install transformers); "
                           "it is a reference for timing only, not a requirement") from None
    if args.pretrained:
        # fp32 master weights whatever the file holds (transformers 5 keeps a checkpoint's own dtype)
        return transformers.BertModel.from_pretrained(str(resolve_pretrained(args.pretrained).folder)).float()
    return transformers.BertModel(transformers.BertConfig(**cfg.to_dict()))


class SentimentModel(torch.nn.Module):
    """BERT, pooler output, dropout, a linear head: Part 1's classifier, with its `logits(batch)`, so that the
    training loss (losses.ClassificationLoss, with the recipe's regularisers) runs on it as in the pipeline."""

    def __init__(self, bert, hidden, labels=5, dropout=0.3):
        super().__init__()
        self.bert, self.dropout, self.classifier = bert, torch.nn.Dropout(dropout), torch.nn.Linear(hidden, labels)

    def logits(self, batch):
        return self.classifier(self.dropout(self.bert(**batch["x"])["pooler_output"]))


def run(args, device, tokenizer, cfg, label, fast=True, bucket=None, hf=False, amp=None, recipe=False):
    """Time the training step and inference for one set of switches; returns a dict of medians. `recipe`
    trains with the regularisers the flags ask for (the pipelines' default recipe unless told otherwise)."""
    from losses import ClassificationLoss
    amp = amp or (args.amp if fast else "none")
    bucket = fast if bucket is None else bucket
    cfg = BertConfig.from_dict(cfg.to_dict(), attn_impl=args.attn if fast else "explicit")
    torch.manual_seed(0)
    if hf:
        model = hf_model(args, cfg)
    elif args.pretrained:
        model = BertModel.from_pretrained(args.pretrained, attn_impl=cfg.attn_impl)
    else:
        model = BertModel(cfg)
    extra = torch.nn.ModuleList()
    if not hf:  # what trains: --fine-tune-mode and --pals, set up as the pipelines do it
        from checkpoint import ModelSpec
        from finetune import prepare_backbone
        prepare_backbone(model, ModelSpec(fine_tune_mode=args.fine_tune_mode, lora_rank=args.lora_rank,
                                          lora_alpha=2.0 * args.lora_rank))
        if args.pals:
            from pals import PALs
            pals = PALs(model.config, ("sst",))
            pals.attach(model)
            pals.task = "sst"
            extra.append(pals)
    model.to(device)
    head = torch.nn.Linear(cfg.hidden_size, 5).to(device)
    extra.to(device)
    params = [p for p in [*model.parameters(), *extra.parameters(), *head.parameters()] if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5) if hf else AdamW(params, lr=1e-5, foreach=fast)
    fwd = model
    if fast and args.compile:
        fwd = torch.compile(model, dynamic=True)
    if hf:
        fwd = lambda **x: {"pooler_output": model(**x).pooler_output}  # noqa: E731
    batches = make_batches(args, tokenizer, bucket=bucket)
    batches = [to_device(b, device) for b in batches]
    real = [int(b["x"]["attention_mask"].sum()) for b in batches]
    padded = [b["x"]["input_ids"].numel() for b in batches]
    flops = [flops_per_batch(cfg, b) for b in batches]
    timed = slice(args.warmup, None)
    classifier = SentimentModel(model, cfg.hidden_size)
    classifier.classifier = head
    if fast and args.compile:
        classifier.bert = fwd
    regs = {}
    if recipe:
        from losses import TermLoss
        regs = TermLoss.regularizers(args, classifier, args.warmup + args.steps * args.repeats)
    loss_fn = ClassificationLoss(**regs)

    def train_step(b):
        with autocast(device, amp):
            if hf:
                loss = F.cross_entropy(head(fwd(**b["x"])["pooler_output"]), b["labels"])
            else:  # Part 1's training loss, with the recipe's regularisers when asked
                loss = loss_fn(classifier, b)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss_fn.after_step()

    def infer_step(b):
        with torch.inference_mode(), autocast(device, amp):
            fwd(**b["x"])

    terms = {k: v for k, v in (("rdrop", args.rdrop_weight), ("smart", args.smart_weight),
                               ("bregman", args.smart_bregman_weight)) if v and recipe}
    results = {"label": label, "fine_tune_mode": "full-model" if hf else args.fine_tune_mode,
               "pals": bool(args.pals and not hf), "amp": amp, "attn": "hf-default" if hf else cfg.attn_impl,
               "bucket": bucket, "pad_multiple": args.pad_multiple if bucket else 0, "foreach": fast or hf, "compile": bool(fast and args.compile), "regularizers": terms}
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for name, step, mult in (("train", train_step, 3), ("infer", infer_step, 1)):
        model.train(name == "train")
        head.train(name == "train")
        for b in batches[:args.warmup]:
            step(b)
        sync(device)
        per_pass = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            for b in batches[timed]:
                step(b)
            sync(device)
            per_pass.append(time.perf_counter() - t0)
        sec = statistics.median(per_pass)
        n = len(batches[timed])
        results[name] = {"tokens_per_s": sum(real[timed]) / sec, "padded_tokens_per_s": sum(padded[timed]) / sec,
                         "ms_per_step": 1000 * sec / n, "flop_per_s": mult * sum(flops[timed]) / sec,
                         "padding_fraction": 1 - sum(real[timed]) / sum(padded[timed])}
    results["trainable_params"] = sum(p.numel() for p in params)
    results["optimizer_state_mb"] = sum(t.numel() * t.element_size() for st in opt.state.values()
                                        for t in st.values() if torch.is_tensor(t)) / 2 ** 20
    results["peak_memory_mb"] = (torch.cuda.max_memory_allocated() / 2 ** 20 if device.type == "cuda"
                                 else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return results


def build_parser():
    ap = Parser(prog="bench.py", description=__doc__)
    ap.add_argument("--pretrained", default=None, help="a checkpoint (default: random weights of --config)")
    ap.add_argument("--config", choices=sorted(CONFIGS), default="minilm",
                    help="the shape of the random model when no --pretrained is given")
    ap.add_argument("--data", choices=["sst", "quora", "synthetic"], default="sst",
                    help="real training batches of a task, or random token ids of --seq_len")
    ap.add_argument("--data_dir", default="data", help="the folder of the course CSVs")
    ap.add_argument("--seq_len", type=positive_int, default=128, help="max_length (real data) or the length (synthetic)")
    ap.add_argument("--batch_size", type=positive_int, default=32, help="examples per step")
    ap.add_argument("--use_gpu", action="store_true", help="time the GPU")
    ap.add_argument("--amp", choices=AMP_CHOICES, default="auto",
                    help="auto: bf16/fp16 only where the hardware runs it natively, else fp32")
    ap.add_argument("--attn", choices=["sdpa", "explicit"], default="sdpa", help="attention path of the fast runs")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model in the fast runs")
    ap.add_argument("--pad_multiple", type=nonneg_int, default=None, metavar="N",
                    help="pad bucketed batches to a multiple of N tokens, as the pipelines do (default: 16 on a GPU, 0 "
                         "on the CPU)")
    ap.add_argument("--steps", type=positive_int, default=20, help="timed batches per pass")
    ap.add_argument("--warmup", type=nonneg_int, default=3, help="untimed batches first")
    ap.add_argument("--repeats", type=positive_int, default=3, help="timed passes over the batches; the median counts")
    ap.add_argument("--threads", type=positive_int, default=None,
                    help="torch CPU threads for the model and the peak alike (default: torch's choice)")
    ap.add_argument("--peak_repeats", type=positive_int, default=10, help="timed matmuls per size for the peak")
    ap.add_argument("--compare", action="store_true", help="also run with every switch off and print ratios")
    ap.add_argument("--hf", action="store_true",
                    help="also time HF transformers' BertModel on the same weights (needs transformers installed)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--fine-tune-mode", dest="fine_tune_mode", choices=["full-model", "last-linear-layer", "lora", "dora"],
                    default="full-model", help="what trains (adapters on query and value, as the pipelines' default)")
    ap.add_argument("--lora_rank", type=positive_int, default=8, help="the adapters' rank (lora, dora)")
    ap.add_argument("--pals", action="store_true", help="with one task's PALs beside every layer")
    add_regularizer_flags(ap.add_argument_group("regularisers, as the pipelines take them (default: Part 2's "
                                                "default recipe)"), DEFAULT_REGULARIZERS["multitask"])
    return ap


def main():
    args = build_parser().parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    device = get_device(args.use_gpu)
    vocab = resolve_pretrained(args.pretrained or "all-minilm-l6-v2").require("vocab").vocab
    tokenizer = BertTokenizer(vocab)
    if args.pretrained:
        cfg = BertConfig.from_json_file(resolve_pretrained(args.pretrained).config)
    else:
        cfg = BertConfig(**CONFIGS[args.config])
    args.amp, why = resolve_amp(args.amp, device)
    print(f"precision: {why}")
    setup_shapes(args, device)
    # The peak for fp32 and for each precision the hardware runs natively: an emulated one means nothing.
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    peaks = {p: matmul_peak(device, dtypes[p], repeats=args.peak_repeats)
             for p in ["fp32"] + [a for a in native_precisions(device) if a == args.amp]}
    regularized = bool(args.rdrop_weight or args.smart_weight or args.smart_bregman_weight)
    runs = ([run(args, device, tokenizer, cfg, "recipe", recipe=True)] if regularized else []) + \
        [run(args, device, tokenizer, cfg, "plain")]
    if args.compare:
        runs.append(run(args, device, tokenizer, cfg, "baseline", fast=False))
    if args.hf:  # HF on our length-bucketed batches (its group_by_length), and on random ones (its default)
        runs.append(run(args, device, tokenizer, cfg, "hf-bucketed", fast=False, bucket=True, hf=True))
        runs.append(run(args, device, tokenizer, cfg, "hf-random", fast=False, bucket=False, hf=True))
        if args.amp != "none":  # HF as its Trainer runs it with --bf16/--fp16: same autocast and batches as ours
            runs.append(run(args, device, tokenizer, cfg, "hf-amp", fast=False, bucket=True, hf=True, amp=args.amp))
    model_name = args.pretrained or f"random {args.config}"
    kind = device_kind(device)
    print(f"{model_name} ({cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}) on {device} ({kind}), "
          f"torch threads {torch.get_num_threads()}, data {args.data}, batch {args.batch_size}, max length {args.seq_len}")
    print(f"matmul peak (best of {args.peak_repeats} per size, 1024 and 2048, after warm-up; median, worst): " + ", ".join(
        f"{k} {v['best'] / 1e12:.2f} TFLOP/s ({v['median'] / 1e12:.2f}, {v['worst'] / 1e12:.2f})" for k, v in peaks.items()))
    for r in runs:
        precision = "fp32" if r["amp"] == "none" else r["amp"]
        for name in ("train", "infer"):
            m = r[name]
            m["mfu"], m["mfu_note"] = mfu(m["flop_per_s"], peaks.get(precision))
            shown = f"MFU {m['mfu']:.1%}" if m["mfu"] is not None else f"MFU n/a ({m['mfu_note']})"
            print(f"{r['label']:>11} {name}: {m['tokens_per_s']:8.0f} tokens/s ({m['padded_tokens_per_s']:.0f} padded, "
                  f"{m['padding_fraction']:.0%} padding), {m['ms_per_step']:7.1f} ms/step, "
                  f"{m['flop_per_s'] / 1e12:.3f} TFLOP/s, {shown} "
                  f"[{precision}, attn {r['attn']}, bucket {r['bucket']}, pad to {r['pad_multiple']}, foreach {r['foreach']}, compile {r['compile']}]")
        if r["regularizers"]:
            print(f"{r['label']:>11} training loss with " + ", ".join(f"{k} {v:g}" for k, v in r["regularizers"].items()))
        print(f"{r['label']:>11} {r['fine_tune_mode']}{' + PALs' if r['pals'] else ''}: {r['trainable_params']:,} "
              f"trainable parameters, AdamW state {r['optimizer_state_mb']:.1f} MiB")
        print(f"{r['label']:>11} peak memory {r['peak_memory_mb']:.0f} MB"
              + ("" if device.type == "cuda" else " (the process's RSS high-water mark so far, CPU)"))
    out = {"args": vars(args), "device": str(device), "device_kind": kind, "cpu_capability": cpu_capability(),
           "precision": "fp32" if args.amp == "none" else args.amp, "precision_why": why,
           "torch_threads": torch.get_num_threads(), "matmul_peak_flop_per_s": peaks, "runs": runs}
    by = {r["label"]: r for r in runs}
    if "recipe" in by:
        cost = by["recipe"]["train"]["ms_per_step"] / by["plain"]["train"]["ms_per_step"]
        out["recipe_step_cost"] = cost
        print(f"the recipe's training step costs {cost:.2f}x a plain one ({by['recipe']['train']['ms_per_step']:.0f} "
              f"against {by['plain']['train']['ms_per_step']:.0f} ms)")
    for other, what in (("baseline", "all fast paths vs all off"),
                        ("hf-bucketed", "ours vs HF transformers on the same length-bucketed batches"),
                        ("hf-random", "ours (bucketed) vs HF transformers on random batches (bucketing's gain included)"),
                        ("hf-amp", "ours vs HF transformers in the same precision, same batches")):
        if other in by:
            ratio = {n: by["plain"][n]["tokens_per_s"] / by[other][n]["tokens_per_s"] for n in ("train", "infer")}
            out[f"speedup_vs_{other}"] = ratio
            print(f"speed-up, {what}: training {ratio['train']:.2f}x, inference {ratio['infer']:.2f}x (non-pad tokens/s)")
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
        print(f"results written to {args.json}")


if __name__ == "__main__":
    main_guard(main)
