"""The fast paths run and keep results: AMP (bf16, fp16 with a grad scaler), bench.py's report."""
import json
import subprocess
import sys

import pytest
import torch

import classifier
from conftest import ROOT
from precision import grad_scaler
from trainer import Trainer


@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_amp_training_runs_and_learns(tmp_path, course_data, tiny_model, amp):
    args = ["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--datasets", "cfimdb",
            "--epochs", "6", "--batch_size", "8", "--fine-tune-mode", "full-model", "--lr", "3e-3",
            "--hidden_dropout_prob", "0", "--amp", amp, "--scheduler", "constant", "--max_grad_norm", "0", "--checkpoint_dir", str(tmp_path / "ck"),
            "--predictions_dir", str(tmp_path / "pred")]
    res = classifier.main(args)
    assert res[0]["dev_acc"] >= 0.75
    log = [json.loads(l) for l in (tmp_path / "ck" / "full-model-cfimdb-log.jsonl").read_text().splitlines()]
    assert all(torch.isfinite(torch.tensor(r["train_loss"])) for r in log)
    assert log[-1]["train_loss"] < log[0]["train_loss"]


def test_fp16_uses_a_grad_scaler_and_bf16_does_not():
    cpu = torch.device("cpu")
    assert grad_scaler(cpu, "fp16").is_enabled()
    assert not grad_scaler(cpu, "bf16").is_enabled() and not grad_scaler(cpu, "none").is_enabled()


def test_grad_accum_equals_one_big_batch():
    """Two half batches accumulated make the same step as the whole batch at once."""
    def run(accum, batches):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 3)
        from optimizer import AdamW
        t = Trainer(model, AdamW(model.parameters(), lr=0.1), torch.device("cpu"), grad_accum=accum)
        loss = lambda m, b: torch.nn.functional.cross_entropy(m(b["x"]), b["labels"])
        t.run_epoch(iter(batches), loss, total=len(batches))
        return model.weight.detach()
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(8, 4, generator=g), torch.randint(0, 3, (8,), generator=g)
    whole = [{"x": x, "labels": y, "index": torch.arange(8)}]
    halves = [{"x": x[:4], "labels": y[:4], "index": torch.arange(4)},
              {"x": x[4:], "labels": y[4:], "index": torch.arange(4)}]
    torch.testing.assert_close(run(1, whole), run(2, halves))


def test_bench_reports_every_figure(tmp_path, course_data, tiny_model):
    out = subprocess.run([sys.executable, "bench.py", "--pretrained", str(tiny_model), "--data", "sst",
                          "--data_dir", str(course_data), "--steps", "2", "--warmup", "1", "--repeats", "1",
                          "--batch_size", "8", "--peak_repeats", "3", "--compare", "--json", str(tmp_path / "b.json")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads((tmp_path / "b.json").read_text())
    # --amp auto: a reduced precision only where this machine runs it natively, and its peak only then
    from precision import cpu_capability, native_precisions
    native = native_precisions(torch.device("cpu"))
    assert r["cpu_capability"] == cpu_capability() and r["cpu_capability"] in out.stdout
    assert r["precision"] == (native[0] if native else "fp32")
    assert set(r["matmul_peak_flop_per_s"]) == {"fp32", *native[:1]}
    for peak in r["matmul_peak_flop_per_s"].values():
        assert peak["best"] >= peak["median"] >= peak["worst"] > 0
    recipe, fast, base = r["runs"]
    assert [x["label"] for x in r["runs"]] == ["recipe", "plain", "baseline"]
    assert recipe["regularizers"] == {"rdrop": 2.0} and fast["regularizers"] == {}  # Part 2's default: R-Drop
    # the recipe's cost is the ratio of the two measured steps; how large it is depends on the machine's load, so it
    # is the benchmark's figure (RESULTS.md), not something a test can assert (R-Drop's second pass: test_regularizers)
    assert r["recipe_step_cost"] == pytest.approx(recipe["train"]["ms_per_step"] / fast["train"]["ms_per_step"])
    assert (fast["amp"], fast["attn"], fast["bucket"], fast["foreach"]) == (native[0] if native else "none", "sdpa",
                                                                            True, True)
    assert (base["amp"], base["attn"], base["bucket"], base["foreach"]) == ("none", "explicit", False, False)
    for run in (recipe, fast, base):
        for phase in ("train", "infer"):
            m = run[phase]
            assert m["tokens_per_s"] > 0 and m["padded_tokens_per_s"] >= m["tokens_per_s"]
            assert m["ms_per_step"] > 0
            assert (m["mfu"] is not None and 0 < m["mfu"] <= 1) or m["mfu_note"].startswith("measurement error")
    assert "speed-up, all fast paths vs all off" in out.stdout
    assert set(r["speedup_vs_baseline"]) == {"train", "infer"}


def test_prefetch_keeps_order_and_raises_errors():
    from trainer import prefetch
    cpu = torch.device("cpu")
    assert list(prefetch(iter(range(100)), cpu)) == list(range(100))

    def broken():
        yield 1
        raise ValueError("bad batch")
    with pytest.raises(ValueError, match="bad batch"):
        list(prefetch(broken(), cpu))


def test_padding_report(course_data, tiny_model):
    from datasets import TaskData, read_examples
    from tokenizer import BertTokenizer
    tok = BertTokenizer.from_pretrained(tiny_model)
    d = TaskData(read_examples(course_data / "ids-sst-train.csv", "sst", "train"), "sst", tok)
    assert d.padding_fraction(8, bucket=True) < d.padding_fraction(8, bucket=False)
    assert "with length bucketing" in d.describe_batches(8, True)


def test_compiled_model_matches_eager(tiny_model):
    """--compile: torch.compile of the BERT forward (dynamic shapes) gives the eager outputs."""
    from utils import maybe_compile
    from checkpoint import ModelSpec
    cfg = ModelSpec(pipeline="classifier", pretrained=str(tiny_model), dropout=[0.0])
    model = classifier.BertSentimentClassifier(cfg).eval()
    ids = torch.tensor([[2, 7, 9, 11, 3, 0], [2, 12, 13, 14, 15, 3]])
    mask = (ids != 0).long()
    with torch.no_grad():
        eager = model(ids, mask)
        maybe_compile(model, True)
        compiled = model(ids, mask)
        longer = model(torch.cat([ids, ids[:, :2]], 1), torch.cat([mask, mask[:, :2]], 1))  # a new length
    torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=1e-4)
    assert longer.shape == (2, 5)


@pytest.mark.parametrize("amp", ["none", "fp16"])
def test_grad_accum_with_a_partial_last_group(amp):
    """3 batches with --grad_accum 2: two optimizer steps, the second on the last batch alone."""
    from optimizer import AdamW
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = AdamW(model.parameters(), lr=0.1)
    t = Trainer(model, opt, torch.device("cpu"), amp=amp, grad_accum=2)
    g = torch.Generator().manual_seed(1)
    batches = [{"x": torch.randn(4, 4, generator=g), "labels": torch.randint(0, 3, (4,), generator=g),
                "index": torch.arange(4)} for _ in range(3)]
    t.run_epoch(iter(batches), lambda m, b: torch.nn.functional.cross_entropy(m(b["x"]), b["labels"]), total=3)
    assert opt.state[model.weight]["step"] == 2


def test_mfu_above_100_percent_is_reported_as_a_measurement_error():
    import bench
    peak = {"best": 1e11, "median": 9e10, "worst": 5e10}
    assert bench.mfu(5e10, peak) == (0.5, "")
    value, note = bench.mfu(1.12e11, peak)
    assert value is None and note.startswith("measurement error: 112%")
    assert bench.mfu(1e10, None) == (None, "no native peak for this precision")


# ----------------------------------------------------------------------------- fixed shapes (--pad_multiple)

def test_padded_width_rounds_up_within_max_length():
    from datasets import padded_width
    assert [padded_width(n, 16, 128) for n in (1, 16, 17, 100, 120, 128)] == [16, 16, 32, 112, 128, 128]
    assert padded_width(120, 100, 128) == 128      # rounded to 200 would pass max_length: capped there
    assert padded_width(37, 0, 128) == 37          # 0: the batch's longest row, as before


def test_pad_multiple_defaults_to_16_on_a_gpu_and_off_on_the_cpu():
    from types import SimpleNamespace
    from datasets import setup_shapes
    for device, expected in (("cpu", 0), ("cuda", 16)):
        args = SimpleNamespace(pad_multiple=None)
        assert setup_shapes(args, torch.device(device), log=lambda *_: None) == expected == args.pad_multiple
    assert setup_shapes(SimpleNamespace(pad_multiple=0), torch.device("cuda"), log=lambda *_: None) == 0  # the switch


def test_fixed_shapes_change_the_widths_and_not_the_predictions(course_data, tiny_model):
    """Padded positions are masked out of attention and pooling: every prediction is the same (fp32), while
    every batch is one of a few widths."""
    from checkpoint import ModelSpec
    from datasets import MULTITASK, data_file, load_multitask_data, set_pad_multiple
    from evaluation import model_eval_multitask
    from multitask import MultitaskBERT
    from tokenizer import BertTokenizer
    torch.manual_seed(0)
    paths = {t: {"dev": data_file(course_data, t, "dev")} for t in MULTITASK}
    for encoding in ("cross", "siamese"):
        data = load_multitask_data(paths, BertTokenizer.from_pretrained(str(tiny_model)), 40, encoding, ("dev",))["dev"]
        model = MultitaskBERT(ModelSpec(pretrained=str(tiny_model), pair_encoding=encoding, dropout=[0.1] * 3))
        plain = {}
        model_eval_multitask(model, data, 4, torch.device("cpu"), raw=plain)
        def widths():
            return [b[k]["input_ids"].shape[1] for d in data.values() for b in d.batches(4) for k in ("x", "a", "b") if k in b]
        unpadded = widths()
        set_pad_multiple(data, 8)  # the tiny sentences are short: 8 rather than 16 gives them several shapes
        padded = widths()
        assert all(w % 8 == 0 for w in padded) and len(set(padded)) < len(set(unpadded)) and padded != unpadded
        fixed = {}
        model_eval_multitask(model, data, 4, torch.device("cpu"), raw=fixed)
        for task in MULTITASK:
            torch.testing.assert_close(torch.as_tensor(fixed[task]), torch.as_tensor(plain[task]), rtol=1e-5, atol=1e-5)
