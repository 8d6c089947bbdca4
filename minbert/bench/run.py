"""bench.py's run: the rows it times, the peak MFU is measured against, the lines it prints and the ratios
between rows (bench.py's docstring says what each row is)."""
import torch

from config import SHAPES, BertConfig
from minbert.bench.candidate import Candidate
from minbert.bench.matmul_floor import step_floor
from minbert.bench.profile import profile_steps
from minbert.bench.timing import matmul_peak, mfu, time_rows
from minbert.hub import resolve_pretrained
from minbert.objectives.regularizers import regularizer_weights
from minbert.precision import cpu_capability, device_kind, native_precisions
from minbert.specs import BenchSettings
from tokenizer import BertTokenizer


def rows(settings):
    """[(label, the Candidate's switches)] that settings ask for: the recipe's step when it has regularisers
    and the plain step, each as the pipelines run it on this device (on a GPU recorded as
    CUDA graphs, and then `eager` beside them, the plain step as it runs without the flag); with
    --compare every switch off; with --hf HF transformers with SDPA attention on our length-bucketed batches
    (its Trainer's group_by_length), on random ones (its default) and in our reduced precision (its
    --bf16/--fp16), and on a GPU `hf-compiled`, HF under torch.compile(mode="reduce-overhead") on the
    recorded step's fixed shapes; with --hf best the last of hf-bucketed, hf-amp and hf-compiled that this device
    runs."""
    amp, recorded = settings.runtime.amp, settings.runtime.record_step
    out = [("recipe", dict(recipe=True, record_step=recorded))] if regularizer_weights(settings.regularizers) else []
    out.append(("plain", dict(record_step=recorded)))
    if recorded:
        out.append(("eager", {}))
    if settings.compare:
        out.append(("baseline", dict(fast=False)))
    hf = []
    if settings.hf:
        hf += [("hf-bucketed", dict(fast=False, bucket=True, hf=True)),
               ("hf-random", dict(fast=False, bucket=False, hf=True))]
        if amp != "none":
            hf.append(("hf-amp", dict(fast=False, bucket=True, hf=True, amp=amp)))
        if settings.runtime.device.type == "cuda":
            hf.append(("hf-compiled", dict(fast=False, bucket=True, hf=True, amp=amp, compiled=True)))
    if settings.hf == "best":  # the fastest setting HF documents for this device and precision
        hf = [r for r in hf if r[0] in ("hf-compiled", "hf-amp", "hf-bucketed")][-1:]
    return out + hf


# Below these, a timing says little (bench.py still runs it: a quick check that every row runs is worth having).
FEW_STEPS, FEW_REPEATS = 10, 3


def benchmark(settings, why=""):
    """Every row bench.py prints, measured now: the recipe's step (when it has regularisers), the plain step,
    with settings.compare every switch off, with settings.hf HF transformers; returns them with the peaks and
    ratios. `why` is the precision's reason, for the record."""
    runtime = settings.runtime
    device = runtime.device
    # real batches need a vocabulary (the checkpoint's, else MiniLM's, which has bert-base's); synthetic ones none
    tokenizer = None if settings.data == "synthetic" else BertTokenizer(
        resolve_pretrained(settings.pretrained or "all-minilm-l6-v2").require("vocab").vocab)
    cfg = (BertConfig.from_json_file(resolve_pretrained(settings.pretrained).config) if settings.pretrained
           else BertConfig(**SHAPES[settings.config]))
    # The peak for fp32 and for each precision the hardware runs natively: an emulated one means nothing.
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
    # A GPU reaches its peak only on large products (8192^3; 1024 and 2048 read about half of it on an H100)
    sizes = (8192,) if device.type == "cuda" else (1024, 2048)
    peaks = {p: matmul_peak(device, dtypes[p], sizes=sizes, repeats=settings.peak_repeats)
             for p in ["fp32"] + [a for a in native_precisions(device) if a == runtime.amp]}
    runs = time_rows(settings, tokenizer, cfg, rows(settings))
    model_name = settings.pretrained or f"random {settings.config}"
    kind = device_kind(device)
    print(f"{model_name} ({cfg.num_hidden_layers} layers, hidden {cfg.hidden_size}) on {device} ({kind}), "
          f"torch threads {torch.get_num_threads()}, data "
          f"{settings.data}, batch {settings.batch_size}, max length {settings.seq_len}")
    print(f"matmul peak (best of {settings.peak_repeats} per size, "
          f"{' and '.join(map(str, sizes))}, after warm-up; median, worst): " + ", ".join(
        f"{k} {v['best'] / 1e12:.2f} TFLOP/s "
        f"({v['median'] / 1e12:.2f}, {v['worst'] / 1e12:.2f})" for k, v in peaks.items()))
    for r in runs:
        precision = "fp32" if r["amp"] == "none" else r["amp"]
        for name in ("train", "infer"):
            m = r[name]
            m["mfu"], m["mfu_note"] = mfu(m["flop_per_s"], peaks.get(precision))
            shown = f"MFU {m['mfu']:.1%}" if m["mfu"] is not None else f"MFU n/a ({m['mfu_note']})"
            print(f"{r['label']:>11} {name}: {m['tokens_per_s']:8.0f} tokens/s "
                  f"({m['padded_tokens_per_s']:.0f} padded, {m['padding_fraction']:.0%} padding), "
                  f"{m['ms_per_step']:7.1f} ms/step, {m['flop_per_s'] / 1e12:.3f} TFLOP/s, {shown} "
                  f"[{precision}, attn {r['attn']}, bucket {r['bucket']}, pad to {r['pad_multiple']}, AdamW "
                  f"{r['adamw']}, compile {r['compile']}, recorded {r['recorded']}]; first {settings.warmup} steps "
                  f"{m['first_s']:.2f}s (compiling and recording included)")
        if r["regularizers"]:
            print(f"{r['label']:>11} "
                  "training loss with " + ", ".join(f"{k} {v:g}" for k, v in r["regularizers"].items()))
        print(f"{r['label']:>11} {r['fine_tune_mode']}{' + PALs' if r['pals'] else ''}: "
              f"{r['trainable_params']:,} trainable parameters, "
              f"AdamW state {r['optimizer_state_mb']:.1f} MiB")
        print(f"{r['label']:>11} peak memory {r['peak_memory_mb']:.0f} MB"
              + ("" if device.type == "cuda" else " (the process's RSS high-water mark so far, CPU)"))
    out = {"device": str(device), "device_kind": kind, "cpu_capability": cpu_capability(),
           "precision": "fp32" if runtime.amp == "none" else runtime.amp, "precision_why": why,
           "torch_threads": torch.get_num_threads(), "matmul_peak_flop_per_s": peaks, "runs": runs}
    by = {r["label"]: r for r in runs}
    if "recipe" in by:
        cost = by["recipe"]["train"]["ms_per_step"] / by["plain"]["train"]["ms_per_step"]
        out["recipe_step_cost"] = cost
        print(f"the recipe's training step costs {cost:.2f}x a plain one "
              f"({by['recipe']['train']['ms_per_step']:.0f} against "
              f"{by['plain']['train']['ms_per_step']:.0f} ms)")
    for other, what in (("eager", "the recorded step vs the eager one"),
                        ("hf-compiled", "ours vs HF transformers under "
                                        "torch.compile(mode='reduce-overhead'), "
                                        "same precision and fixed shapes"),
                        ("baseline", "all fast paths vs all off"),
                        ("hf-bucketed", "ours vs HF transformers on the same length-bucketed batches"),
                        ("hf-random", "ours (bucketed) vs HF transformers on "
                                      "random batches (bucketing's gain included)"),
                        ("hf-amp", "ours vs HF transformers in the same precision, same batches")):
        if other in by:
            ratio = {n: by["plain"][n]["tokens_per_s"] / by[other][n]["tokens_per_s"] for n in ("train",
                                                                                                "infer")}
            out[f"speedup_vs_{other}"] = ratio
            print(f"speed-up, {what}: training {ratio['train']:.2f}x, "
                  f"inference {ratio['infer']:.2f}x (non-pad tokens/s)")
    if settings.steps < FEW_STEPS or settings.repeats < FEW_REPEATS:
        out["too_few_to_compare"] = True
        print(f"note: {settings.steps} timed steps x {settings.repeats} passes: at fewer than {FEW_STEPS} steps or "
              f"{FEW_REPEATS} passes, the figures and their ratios are mostly noise (a step's launch and a stray "
              f"pause weigh as much as the work); the defaults time {BenchSettings.steps} x {BenchSettings.repeats}")
    for label, switches in (("plain", {}), ("hf-amp", dict(fast=False, bucket=True, hf=True,
                                                           amp=runtime.amp)))[:1 + bool(settings.hf)]:
        if settings.profile and (label == "plain" or runtime.amp != "none"):
            out[f"profile_{label}"] = p = profile_steps(Candidate(settings, tokenizer, cfg, label, **switches),
                                                        settings.profile, settings.warmup)
            size = (f"{p['padded_tokens_per_step']:.0f} padded tokens a step, the timed steps "
                    f"{by['plain']['padded_tokens_per_step']:.0f}")
            print(f"{label} training step under the profiler ({settings.profile} steps, {size}), "
                  f"{p['ms_per_step']:.3g} ms/step of operator time"
                  f"{' (the kernels they launched)' if device.type == 'cuda' else ''}: "
                  + ", ".join(f"{k} {v:.3g}" for k, v in p["phases"].items()) + " ms; by kind: "
                  + ", ".join(f"{k} {v:.3g}" for k, v in p["categories"].items()) + " ms")
            print(f"{label} top operators (ms/step): " + ", ".join(f"{k} {v:.3g}" for k, v in p["top"]))
    if settings.profile:
        out["floor"] = f = step_floor(Candidate(settings, tokenizer, cfg, "plain"), cfg, runtime.amp, settings.warmup)
        plain = by["plain"]["train"]["ms_per_step"]
        print("floor of the plain step (its matrix products and optimizer step alone, same kernels and "
              f"precision): {f['ms_per_step']:.3g} ms (forward {f['forward_ms']:.3g}, backward "
              f"{f['backward_ms']:.3g}, optimizer {f['optimizer_ms']:.3g}), {f['ms_per_step'] / plain:.0%} "
              f"of the plain step's {plain:.3g} ms")
        for other in ("hf-amp", "hf-bucketed"):
            if other in by and by[other]["amp"] == by["plain"]["amp"]:
                theirs = by[other]["train"]["ms_per_step"]
                out["floor"]["max_speedup_vs_" + other] = theirs / f["ms_per_step"]
                print(f"  {other} takes {theirs:.3g} ms on the same batches: no step on these kernels is "
                      f"more than {theirs / f['ms_per_step']:.2f}x faster "
                      f"than it (the plain step is {theirs / plain:.2f}x)")
    return out
