"""Checked value types for flags: a value outside its range is one line naming the flag (argparse adds the
flag's name to an ArgumentTypeError), never a run that starts and fails later."""
import argparse
import math
import os


def _number(kind, check, what):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not "
                                             f"{'an integer' if kind is int else 'a number'}") from None
        if not math.isfinite(value):  # NaN and infinity mean no run anyone wants
            raise argparse.ArgumentTypeError(f"{text} must be a finite number: {what}")
        if not check(value):
            raise argparse.ArgumentTypeError(f"{text} must be {what}")
        return value
    parse.__name__ = what  # argparse names the type in some messages
    return parse


positive_int = _number(int, lambda v: v >= 1, "an integer >= 1")
nonneg_int = _number(int, lambda v: v >= 0, "an integer >= 0")
positive_float = _number(float, lambda v: v > 0, "a number > 0")
nonneg_float = _number(float, lambda v: v >= 0, "a number >= 0")
probability = _number(float, lambda v: 0 <= v < 1, "a probability in [0, 1)")
fraction = _number(float, lambda v: 0 <= v <= 1, "a fraction in [0, 1]")
share = _number(float, lambda v: 0 < v <= 1, "a share in (0, 1]")
llrd_factor = _number(float, lambda v: 0 < v <= 1, "a factor in (0, 1]")
momentum = _number(float, lambda v: 0 <= v < 1, "a momentum in [0, 1)")
# LoRA's alpha scales the update B A by alpha / r; the papers use r to a few times r. Far above, the update
# swamps the frozen weights and the loss becomes NaN, which would read as a learning rate too high.
lora_scale = _number(float, lambda v: 0 < v <= 1e4, "a number in (0, 10000]")
# report.py --compare's resamples: fewer than 100 leave no room between a 95% interval's ends, nor for a p below
# 0.05 among several rows (Holm's smallest threshold, 0.05 / rows, needs p = 1 / (1 + resamples) below it).
# At most a million: 10,000 (the default) already puts a 95% interval's ends within Monte Carlo error of about
# 0.1 of a point; a million takes minutes on the full dev sets, and 10**12 would run for days without a word.
resamples = _number(int, lambda v: 100 <= v <= 10 ** 6, "an integer from 100 to 1,000,000")
# Part 2's steps an epoch: its task schedule is drawn whole at the epoch's start (tasks/sampling.py), one entry a
# step; ten million is weeks of training on any card, 10**8 would fill the memory before the first step.
epoch_steps = _number(int, lambda v: 1 <= v <= 10 ** 7, "an integer from 1 to 10,000,000")
# A tokenised sentence holds [CLS] and [SEP] at least: a length of 1 leaves the tokenizer nothing to keep.
token_length = _number(int, lambda v: v >= 2, "an integer >= 2")
# Epochs: the schedule warms up over 10% of all the steps, so a count typed with a few digits too many trains for
# ever at a learning rate near 0 without a word; ten thousand passes is far past any of the course's data sets.
epochs = _number(int, lambda v: 1 <= v <= 10 ** 4, "an integer from 1 to 10,000")
# Torch's CPU threads: up to this machine's logical CPUs. More only share the cores, which makes a timing noisier,
# and thousands exhaust the machine's threads before the first step.
def threads(text):
    value, cpus = positive_int(text), os.cpu_count() or 1
    if value > cpus:
        raise argparse.ArgumentTypeError(f"{text} must be an integer from 1 to {cpus}, this machine's CPUs")
    return value


threads.__name__ = "an integer from 1 to the machine's CPUs"  # (the docs hold for every machine)
# bench.py's batches are made before the clock starts, each held in memory: a hundred thousand of the default
# recipe's step is minutes of timing already
bench_steps = _number(int, lambda v: 1 <= v <= 10 ** 5, "an integer from 1 to 100,000")
bench_warmup = _number(int, lambda v: 0 <= v <= 10 ** 5, "an integer from 0 to 100,000")
# Beam search's beams: each is a row of the model's batch at every step, with its own key-value cache (GPT-2 small
# at 1,024 positions: about 75 MB a beam in fp32), and the usual widths are 2 to 10. 128 beams already need some
# 10 GB of cache; a million would fail on its first step after the model had trained.
beams = _number(int, lambda v: 1 <= v <= 128, "a number of beams from 1 to 128")
# A number beam search can rank by (NaN and infinity are refused, as for every number here).
finite_float = _number(float, lambda v: True, "a number")
# Beam search divides a score by the length to this power: at GPT-2's 1,024 positions a power above 100 leaves a
# float's range (1024 ** 103 > 1.8e308), and far below that only the length decides.
length_penalty = _number(float, lambda v: abs(v) <= 100, "a number in [-100, 100]")


def early_stopping(text):
    """--early_stopping: HF's three stopping rules of beam search, as gpt2/generation.py takes them."""
    rules = {"false": False, "true": True, "never": "never"}
    if text not in rules:
        raise argparse.ArgumentTypeError(f"{text!r}: choose false (HF's default), true or never")
    return rules[text]


# NumPy's legacy seeding (np.random.seed) takes 0 .. 2**32 - 1, so a seed outside would fail mid-start.
seed = _number(int, lambda v: 0 <= v < 2 ** 32, "an integer from 0 to 4294967295 (2**32 - 1)")


def fold_spec(text):
    """--fold I/K: [I, K] with K >= 2 and 1 <= I <= K."""
    try:
        i, k = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not I/K (e.g. "
                                         "1/3: train without fold 1 of 3)") from None
    if k < 2 or not 1 <= i <= k:
        raise argparse.ArgumentTypeError(f"{text}: I/K needs K >= 2 and 1 <= I <= K")
    return [i, k]


def names_among(choices):
    """The type of a comma-separated list of names, each one of `choices` (--lora_targets: finetuning/lora.py's
    TARGETS)."""
    def parse(text):
        names = [t.strip() for t in text.split(",") if t.strip()]
        if not names or any(t not in choices for t in names):
            raise argparse.ArgumentTypeError(f"{text!r}: choose a comma-separated list of {','.join(choices)}")
        twice = next((t for i, t in enumerate(names) if t in names[:i]), None)
        if twice:  # (the list names layers to wrap: one wrapped twice would wrap its own wrapper)
            raise argparse.ArgumentTypeError(f"{text!r}: {twice} is named twice; name each once")
        return names
    parse.__name__ = "a list of names"  # argparse names the type in some messages
    return parse
