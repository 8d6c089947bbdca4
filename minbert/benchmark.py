"""bench.py's measurements: the matmul peak MFU is measured against, batches as the pipelines build them, and the
timing of one training step and of inference for a set of switches (ours with the recipe's regularisers, ours
plain, every switch off, HF transformers on the same weights and batches). bench.py's docstring says what each
row means."""
import resource
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

from bert import BertModel
from config import BertConfig
from datasets import TaskData, batch_indices, set_pad_multiple
from minbert.course_data import data_file, read_examples
from minbert.finetuning.pals import PALs
from minbert.hub import resolve_pretrained
from minbert.objectives.losses import ClassificationLoss, TermLoss
from minbert.precision import autocast, cpu_capability, device_kind, native_precisions
from minbert.specs import ModelSpec
from minbert.tasks.sentiment import BertSentimentClassifier
from optimizer import AdamW
from tokenizer import BertTokenizer
from utils import MinbertError, to_device

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


def make_batches(settings, tokenizer, bucket, seed=0):
    """Index lists of real examples (or synthetic token ids) as padded batches on the host; bucketed batches are
    padded to a multiple of --pad_multiple, as the pipelines pad them."""
    if settings.data == "synthetic":
        rng = np.random.default_rng(seed)
        out = []
        for _ in range(settings.warmup + settings.steps):
            ids = torch.from_numpy(rng.integers(1000, 20000, size=(settings.batch_size, settings.seq_len)))
            ids[:, 0] = 101
            out.append({"x": {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                              "token_type_ids": torch.zeros_like(ids)}, "labels": torch.zeros(settings.batch_size, dtype=torch.long)})
        return out
    task = "sst" if settings.data == "sst" else "quora"
    examples = read_examples(data_file(settings.data_dir, task, "train"), task, "train", log=lambda *_: None)
    data = set_pad_multiple(TaskData(examples, task, tokenizer, max_length=settings.seq_len), settings.runtime.pad_multiple if bucket else 0)
    idx = batch_indices(data.lengths, settings.batch_size, shuffle=True, seed=seed, bucket=bucket)
    return [data.batch(i) for i in idx[:settings.warmup + settings.steps]]


def flops_per_batch(cfg, batch):
    """Forward FLOPs of the padded batch: 2 per weight per token for the matmuls, plus attention."""
    B, T = batch["x"]["input_ids"].shape
    H, L, I = cfg.hidden_size, cfg.num_hidden_layers, cfg.intermediate_size
    per_token = L * (2 * (4 * H * H + 2 * H * I) + 4 * T * H)  # QKVO, FFN; QK^T and AV
    return B * T * per_token


def hf_model(settings, cfg):
    """The usual alternative, for reference: HF transformers' BertModel on the same weights, as most
    fine-tuning scripts run it (fp32, its default attention, torch.optim.AdamW), on our length-bucketed
    batches (what its Trainer's group_by_length gives) or on batches padded in random order. Only bench.py
    touches transformers, and only with --hf."""
    try:
        import transformers
    except ImportError:
        raise MinbertError("--hf needs the transformers package (pip install transformers); "
                           "it is a reference for timing only, not a requirement") from None
    if settings.pretrained:
        # fp32 master weights whatever the file holds (transformers 5 keeps a checkpoint's own dtype)
        return transformers.BertModel.from_pretrained(str(resolve_pretrained(settings.pretrained).folder)).float()
    return transformers.BertModel(transformers.BertConfig(**cfg.to_dict()))


def time_model(settings, tokenizer, cfg, label, fast=True, bucket=None, hf=False, amp=None, recipe=False):
    """Time the training step and inference for one set of switches; returns a dict of medians. `recipe`
    trains with settings.regularizers (the pipelines' default recipe unless told otherwise)."""
    s, rt = settings, settings.runtime
    device = rt.device
    amp = amp or (rt.amp if fast else "none")
    bucket = fast if bucket is None else bucket
    cfg = BertConfig.from_dict(cfg.to_dict(), attn_impl=rt.attn if fast else "explicit")
    torch.manual_seed(0)
    if hf:
        model = hf_model(s, cfg)
    elif s.pretrained:
        model = BertModel.from_pretrained(s.pretrained, attn_impl=cfg.attn_impl)
    else:
        model = BertModel(cfg)
    extra = torch.nn.ModuleList()
    if hf:
        head = torch.nn.Linear(cfg.hidden_size, 5)
    else:  # Part 1's classifier, what trains set up as the pipelines do it (--fine-tune-mode, --pals)
        spec = ModelSpec(pipeline="classifier", fine_tune_mode=s.fine_tune_mode, lora_rank=s.lora_rank,
                         lora_alpha=2.0 * s.lora_rank, dropout=[0.3], num_labels=5)
        classifier = BertSentimentClassifier(spec, bert=model)
        head = classifier.classifier
        if s.pals:
            pals = PALs(model.config, ("sst",))
            pals.attach(model)
            pals.task = "sst"
            extra.append(pals)
    model.to(device)
    head.to(device)
    extra.to(device)
    params = [p for p in [*model.parameters(), *extra.parameters(), *head.parameters()] if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5) if hf else AdamW(params, lr=1e-5, foreach=fast)
    fwd = model
    if fast and rt.compile:
        fwd = torch.compile(model, dynamic=True)
        classifier.bert = fwd
    if hf:
        fwd = lambda **x: {"pooler_output": model(**x).pooler_output}  # noqa: E731
    batches = [to_device(b, device) for b in make_batches(s, tokenizer, bucket=bucket)]
    real = [int(b["x"]["attention_mask"].sum()) for b in batches]
    padded = [b["x"]["input_ids"].numel() for b in batches]
    flops = [flops_per_batch(cfg, b) for b in batches]
    timed = slice(s.warmup, None)
    regs = (TermLoss.regularizers(s.regularizers, classifier, s.warmup + s.steps * s.repeats)
            if recipe and not hf else {})
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

    reg = s.regularizers
    terms = {k: v for k, v in (("rdrop", reg.rdrop_weight), ("smart", reg.smart_weight),
                               ("bregman", reg.smart_bregman_weight)) if v and recipe}
    results = {"label": label, "fine_tune_mode": "full-model" if hf else s.fine_tune_mode,
               "pals": bool(s.pals and not hf), "amp": amp, "attn": "hf-default" if hf else cfg.attn_impl,
               "bucket": bucket, "pad_multiple": rt.pad_multiple if bucket else 0, "foreach": fast or hf,
               "compile": bool(fast and rt.compile), "regularizers": terms}
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    for name, step, mult in (("train", train_step, 3), ("infer", infer_step, 1)):
        model.train(name == "train")
        head.train(name == "train")
        for b in batches[:s.warmup]:
            step(b)
        sync(device)
        per_pass = []
        for _ in range(s.repeats):
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


def benchmark(settings, why=""):
    """Every row bench.py prints, measured now: the recipe's step (when it has regularisers), the plain step, with
    settings.compare every switch off, with settings.hf HF transformers; returns them with the peaks and ratios.
    `why` is the precision's reason, for the record."""
    s, rt = settings, settings.runtime
    device = rt.device
    vocab = resolve_pretrained(s.pretrained or "all-minilm-l6-v2").require("vocab").vocab
    tokenizer = BertTokenizer(vocab)
    cfg = (BertConfig.from_json_file(resolve_pretrained(s.pretrained).config) if s.pretrained
           else BertConfig(**CONFIGS[s.config]))
    # The peak for fp32 and for each precision the hardware runs natively: an emulated one means nothing.
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    peaks = {p: matmul_peak(device, dtypes[p], repeats=s.peak_repeats)
             for p in ["fp32"] + [a for a in native_precisions(device) if a == rt.amp]}
    reg = s.regularizers
    regularized = bool(reg.rdrop_weight or reg.smart_weight or reg.smart_bregman_weight)
    runs = ([time_model(s, tokenizer, cfg, "recipe", recipe=True)] if regularized else []) + \
        [time_model(s, tokenizer, cfg, "plain")]
    if s.compare:
        runs.append(time_model(s, tokenizer, cfg, "baseline", fast=False))
    if s.hf:  # HF on our length-bucketed batches (its group_by_length), and on random ones (its default)
        runs.append(time_model(s, tokenizer, cfg, "hf-bucketed", fast=False, bucket=True, hf=True))
        runs.append(time_model(s, tokenizer, cfg, "hf-random", fast=False, bucket=False, hf=True))
        if rt.amp != "none":  # HF as its Trainer runs it with --bf16/--fp16: same autocast and batches as ours
            runs.append(time_model(s, tokenizer, cfg, "hf-amp", fast=False, bucket=True, hf=True, amp=rt.amp))
    model_name = s.pretrained or f"random {s.config}"
    kind = device_kind(device)
    print(f"{model_name} ({cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}) on {device} ({kind}), "
          f"torch threads {torch.get_num_threads()}, data {s.data}, batch {s.batch_size}, max length {s.seq_len}")
    print(f"matmul peak (best of {s.peak_repeats} per size, 1024 and 2048, after warm-up; median, worst): " + ", ".join(
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
    out = {"device": str(device), "device_kind": kind, "cpu_capability": cpu_capability(),
           "precision": "fp32" if rt.amp == "none" else rt.amp, "precision_why": why,
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
    return out
