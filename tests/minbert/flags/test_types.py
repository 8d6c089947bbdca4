"""flags/types.py: numeric flags are checked when parsed (one line naming the flag), and the largest seed runs."""
import pytest

import classifier
import multitask_classifier as mt
from tests.course import part2_args
from utils import MinbertError


@pytest.mark.parametrize("flag, value, match", [
    ("--epochs", "0", r"argument --epochs: 0 must be an integer from 1 to 10,000"),
    ("--epochs", "-1", r"argument --epochs: -1 must be an integer from 1 to 10,000"),
    # the warm-up is 10% of all the steps: a count with digits too many trained for ever at a rate near 0
    ("--epochs", "10001", r"argument --epochs: 10001 must be an integer from 1 to 10,000"),
    # a linear wrapped twice had wrapped its own wrapper: a traceback after the model loaded
    ("--lora_targets", "query,query", r"argument --lora_targets: 'query,query': query is named twice"),
    ("--batch_size", "0", r"argument --batch_size: 0 must be an integer >= 1"),
    ("--lr", "-1", r"argument --lr: -1 must be a number > 0"),
    ("--lr", "abc", r"argument --lr: 'abc' is not a number"),
    ("--hidden_dropout_prob", "1.5", r"argument --hidden_dropout_prob: 1.5 must be a probability in \[0, 1\)"),
    ("--grad_accum", "0", r"argument --grad_accum: 0 must be an integer >= 1"),
    ("--max_length", "0", r"argument --max_length: 0 must be an integer >= 1"),
    ("--weight_decay", "-0.1", r"argument --weight_decay: -0.1 must be a number >= 0"),
    # NumPy's legacy seeding takes 0 .. 2**32 - 1: outside, a traceback mid-start
    ("--seed", "-1", r"argument --seed: -1 must be an integer from 0 to 4294967295"),
    ("--seed", "99999999999", r"argument --seed: 99999999999 must be an integer from 0 to 4294967295"),
    # infinity passes "> 0" but is no learning rate, weight or norm anyone means
    ("--lr", "inf", r"argument --lr: inf must be a finite number: a number > 0"),
    ("--max_grad_norm", "inf", r"argument --max_grad_norm: inf must be a finite number: a number >= 0"),
    ("--rdrop_weight", "inf", r"argument --rdrop_weight: inf must be a finite number: a number >= 0"),
    # alpha / r far above the papers' values swamps the frozen weights: a NaN loss that would blame --lr
    ("--lora_alpha", "1e308", r"argument --lora_alpha: 1e308 must be a number in \(0, 10000\]"),
    ("--lora_alpha", "0", r"argument --lora_alpha: 0 must be a number in \(0, 10000\]"),
])
@pytest.mark.parametrize("script", [classifier, mt])
def test_numeric_flags_are_checked_at_parse_time(script, flag, value, match):
    with pytest.raises(MinbertError, match=match):
        script.get_args(["--pretrained", "all-minilm-l6-v2", flag, value])


def test_the_largest_seed_runs(tmp_path, course_data, tiny_model):
    """--seed 4294967295 reaches every generator a run seeds (NumPy's legacy seeding, torch's, the samplers'): the
    run completes, records it, and is repeatable; another seed gives another model."""
    from minbert.runs.checkpoint import load_checkpoint
    largest = str(2 ** 32 - 1)
    for name, seed in (("a", largest), ("b", largest), ("c", "0")):
        mt.main(part2_args(tmp_path / name, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "1",
                           "--seed", seed))
    assert load_checkpoint(tmp_path / "a" / "ck" / "mt.pt")["flags"]["seed"] == 2 ** 32 - 1
    outputs = {n: (tmp_path / n / "pred" / "sts-dev-output.csv").read_text() for n in "abc"}
    assert outputs["a"] == outputs["b"] != outputs["c"]


@pytest.mark.parametrize("kind, inside, outside", [
    ("probability", ["0", "-0", "0.999999"], ["1", "-1e-9", "nan", "inf"]),         # --label_smoothing, dropouts
    ("resamples", ["100", "100000", "1000000"], ["99", "0", "-100", "1e3", "1000001"]),  # report.py --resamples
    ("epoch_steps", ["1", "10000000"], ["0", "-1", "10000001", "1e6", "nan"]),      # --steps_per_epoch
    ("bench_steps", ["1", "100000"], ["0", "100001", "1000000000000"]),              # bench.py --steps
    ("bench_warmup", ["0", "100000"], ["-1", "100001"]),                              # bench.py --warmup
    ("epochs", ["1", "10000"], ["0", "10001", "nan"]),                                # --epochs
    ("token_length", ["2", "512"], ["1", "0", "-2"]),                                 # tools/step_losses.py
    ("share", ["1", "1e-9"], ["0", "1.0000001", "nan"]),                           # --top_p
    ("finite_float", ["-1e300", "0", "2"], ["nan", "inf", "-inf"]),                # --length_penalty
])
def test_each_bound_is_checked_from_both_sides(kind, inside, outside):
    """The values at and just inside a type's bounds are taken; those just outside, NaN and infinity are one line."""
    import argparse
    from minbert.flags import types
    check = getattr(types, kind)
    for text in inside:
        check(text)
    for text in outside:
        with pytest.raises(argparse.ArgumentTypeError):
            check(text)


def test_early_stopping_takes_hfs_three_values_and_nothing_else():
    import argparse
    from minbert.flags.types import early_stopping
    assert [early_stopping(t) for t in ("false", "true", "never")] == [False, True, "never"]
    for text in ("False", "1", "", "always"):
        with pytest.raises(argparse.ArgumentTypeError, match="choose false"):
            early_stopping(text)



def test_threads_run_from_one_to_the_machines_cpus(monkeypatch):
    """bench.py --threads 5000 had started 10,000 threads, which left the machine none for other processes."""
    import argparse
    from minbert.flags import types
    monkeypatch.setattr(types.os, "cpu_count", lambda: 4)
    assert [types.threads(t) for t in ("1", "4")] == [1, 4]
    for text, why in (("5", "5 must be an integer from 1 to 4, this machine's CPUs"), ("0", "0 must be an integer >= 1")):
        with pytest.raises(argparse.ArgumentTypeError, match=f"^{why}$"):
            types.threads(text)
