"""bench.py: every figure reported, for the full model and for adapters (with their optimizer state's size)."""
import json

import pytest
import torch

from tests.processes import run_main


def test_bench_reports_every_figure(tmp_path, course_data, tiny_model):
    out = run_main("bench.py", "--pretrained", str(tiny_model), "--data", "sst", "--data_dir", str(course_data),
                   "--steps", "2", "--warmup", "1", "--repeats", "1", "--batch_size", "8", "--peak_repeats", "3",
                   "--compare", "--json", str(tmp_path / "b.json"))
    assert out.returncode == 0, out.stderr[-2000:]
    r = json.loads((tmp_path / "b.json").read_text())
    # --amp auto: a reduced precision only where this machine runs it natively, and its peak only then
    from minbert.precision import cpu_capability, native_precisions
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
    assert (fast["amp"], fast["attn"], fast["bucket"], fast["adamw"]) == (native[0] if native else "none", "sdpa",
                                                                          True, "fused")
    assert (base["amp"], base["attn"], base["bucket"], base["adamw"]) == ("none", "explicit", False, "loop")
    for run in (recipe, fast, base):
        for phase in ("train", "infer"):
            m = run[phase]
            assert m["tokens_per_s"] > 0 and m["padded_tokens_per_s"] >= m["tokens_per_s"]
            assert m["ms_per_step"] > 0
            assert (m["mfu"] is not None and 0 < m["mfu"] <= 1) or m["mfu_note"].startswith("measurement error")
    assert "speed-up, all fast paths vs all off" in out.stdout
    assert set(r["speedup_vs_baseline"]) == {"train", "infer"}
    # 2 steps x 1 pass: said to be too few to compare (it had printed 84x ratios without a word)
    assert r["too_few_to_compare"] and "note: 2 timed steps x 1 passes: at fewer than 10 steps or 3 passes" in out.stdout


def test_bench_times_adapters_and_measures_their_optimizer_state(tmp_path, course_data, tiny_model):
    figures = {}
    for mode in ("full-model", "lora"):
        out = run_main("bench.py", "--pretrained", str(tiny_model), "--data", "sst", "--data_dir", str(course_data),
                       "--steps", "2", "--warmup", "1", "--repeats", "1", "--batch_size", "8", "--peak_repeats",
                       "1", "--fine-tune-mode", mode, *(["--lora_rank", "2"] if mode == "lora" else []),  # idle else
                       "--json", str(tmp_path / f"{mode}.json"))
        assert out.returncode == 0, out.stderr[-2000:]
        run = __import__("json").loads((tmp_path / f"{mode}.json").read_text())["runs"][0]
        assert run["fine_tune_mode"] == mode and f"{run['trainable_params']:,} trainable parameters" in out.stdout
        # AdamW's measured state: exp_avg and exp_avg_sq in fp32 for each trainable parameter (+ step counts)
        assert run["optimizer_state_mb"] * 2 ** 20 >= 8 * run["trainable_params"]
        assert run["optimizer_state_mb"] * 2 ** 20 <= 8 * run["trainable_params"] + 8 * 1000
        figures[mode] = run["trainable_params"]
    # rank-2 adapters on query and value of 2 layers: 2 x 2 x (2 x 32 + 32 x 2), plus the 5-way head
    assert figures["lora"] == 2 * 2 * (2 * 32 + 32 * 2) + 32 * 5 + 5 < figures["full-model"]


def test_json_never_replaces_a_file_it_did_not_write(tmp_path, course_data, tiny_model):
    """--json naming the user's CSV or a course data file: one line before any timing, the file unchanged."""
    for victim in (tmp_path / "mydata.csv", course_data / "ids-sst-dev.csv"):
        if not victim.exists():
            victim.write_text("id,label\n1,2\n")
        before = victim.read_bytes()
        out = run_main("bench.py", "--pretrained", str(tiny_model), "--data", "sst", "--data_dir", str(course_data),
                       "--steps", "1", "--json", str(victim))
        assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1, out.stderr[-2000:]
        why = "is named like a course data file" if victim.parent == course_data else "holds a file this project did not write"
        assert f"--json {victim}: {why}" in out.stderr
        assert victim.read_bytes() == before
    out = run_main("bench.py", "--json", "README.md")
    assert out.returncode == 2 and "--json README.md: is one of the project's own files" in out.stderr


def test_flags_that_cannot_act_are_one_line_before_any_timing(tiny_model):
    """A --seq_len beyond the model's positions, and --config beside --pretrained (which sets the shape)."""
    import bench
    from utils import MinbertError
    with pytest.raises(MinbertError, match=r"^--seq_len 100000: longer than the model's 512 position embeddings "
                                           r"\(--config minilm\); give at most 512$"):
        bench.main(["--data", "synthetic", "--seq_len", "100000"])
    with pytest.raises(MinbertError, match=rf"^--seq_len 513: longer than the model's 512 position embeddings "
                                           rf"\({tiny_model}\); give at most 512$"):
        bench.main(["--pretrained", str(tiny_model), "--seq_len", "513"])
    with pytest.raises(MinbertError, match=r"^--config is the shape of the random model, which --pretrained replaces "
                                           r"with the checkpoint's: as given it would change nothing"):
        bench.main(["--pretrained", str(tiny_model), "--config", "base"])
    with pytest.raises(MinbertError, match=r"^--data_dir is the folder of the course CSVs, which --data synthetic does "
                                           r"not read \(random token ids\): as given it would change nothing"):
        bench.main(["--data", "synthetic", "--data_dir", "MISSING"])
