"""Timing bench.py's rows: the matmul peak MFU is measured against, and each Candidate's training and
inference passes over the same batches, the median of several.

Rows are timed in rounds, one model resident at a time (time_rows says why).
"""
import resource
import statistics
import time

import torch

from minbert.bench.candidate import Candidate


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
            rates.append(2 * n ** 3 / seconds(device, lambda _: a @ b, [None]))
    return {"best": max(rates), "median": statistics.median(rates), "worst": min(rates)}


def mfu(flop_per_s, peak):
    """(MFU, note). Above 100% the peak was measured low: a measurement error, reported as such."""
    if peak is None:
        return None, "no native peak for this precision"
    value = flop_per_s / peak["best"]
    if value > 1.0:
        return None, f"measurement error: {value:.0%} of the measured peak (the peak read low)"
    return value, ""


def seconds(device, fn, items):
    """Seconds to run fn(item) for each of `items` on `device`, the device's queue drained before and after."""
    sync(device)
    t0 = time.perf_counter()
    for item in items:
        fn(item)
    sync(device)
    return time.perf_counter() - t0


def _figures(counts, sec, mult):
    """Rates from a pass's seconds and the timed batches' counts: {"real", "padded", "flops", "steps"}."""
    real, padded = counts["real"], counts["padded"]
    return {"tokens_per_s": real / sec, "padded_tokens_per_s": padded / sec,
            "ms_per_step": 1000 * sec / counts["steps"], "flop_per_s": mult * counts["flops"] / sec,
            "padding_fraction": 1 - real / padded}


def _measure(settings, tokenizer, cfg, label, switches, timed):
    """One Candidate built, warmed up, timed alone and freed: its row, the timed batches' counts, its
    training and inference pass in seconds and its static figures (trainable parameters, optimizer
    state, peak memory so far)."""
    device = settings.runtime.device
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    c = Candidate(settings, tokenizer, cfg, label, **switches)
    sec = {}
    for name in ("train", "infer"):
        step = c.train_step if name == "train" else c.infer_step
        c.train(name == "train")
        # compiling and recording happen here
        sec["first_" + name] = seconds(c.device, step, c.warmup(settings.warmup))
        sec[name] = seconds(c.device, step, c.batches[timed])
    counts = {"real": sum(c.real[timed]), "padded": sum(c.padded[timed]), "flops": sum(c.flops[timed]),
              "steps": len(c.batches[timed])}
    static = {"trainable_params": sum(p.numel() for p in c.params),
              "optimizer_state_mb": sum(t.numel() * t.element_size() for st in c.opt.state.values()
                                        for t in st.values() if torch.is_tensor(t)) / 2 ** 20,
              "peak_memory_mb": (torch.cuda.max_memory_allocated() / 2 ** 20 if device.type == "cuda"
                                 else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)}
    return c.row, counts, sec, static


def time_rows(settings, tokenizer, cfg, rows):
    """[(label, switches)] timed: a dict of medians per row (training and inference tokens/s, ms per step,
    FLOP/s, padding), with its trainable parameters, optimizer state and peak memory.

    Rounds: in each, every row in turn is built, warmed up, timed and freed. One model resident at a time, as
    in a real run (several resident models share caches and the allocator, which slows some more than others),
    and rows alternate, so that a machine whose speed drifts over minutes moves every row alike."""
    timed = slice(settings.warmup, None)
    passes, first = {}, {}
    for _ in range(settings.repeats):
        for label, switches in rows:
            row, counts, sec, static = _measure(settings, tokenizer, cfg, label, switches, timed)
            first.setdefault(label, (row, counts, static))
            for name, t in sec.items():
                passes.setdefault((label, name), []).append(t)
    results = []
    for label, _ in rows:
        row, counts, static = first[label]
        r = dict(row)
        for name, mult in (("train", 3), ("infer", 1)):
            r[name] = _figures(counts, statistics.median(passes[label, name]), mult)
            r[name]["first_s"] = statistics.median(passes[label, "first_" + name])
        r.update(static)
        r["padded_tokens_per_step"] = counts["padded"] / counts["steps"]
        results.append(r)
    return results
