"""tools/step_timing.py, bench.py's independent check: it times our step and HF's on its own batches and loop, and
refuses rows this device cannot run."""
import json

import pytest

from minbert.cli import MinbertError
from tools.step_timing import main


def test_times_our_step_and_hfs_on_the_cpu(tmp_path):
    r = main(["--config", "tiny", "--seq_len", "8", "--batch_size", "2", "--steps", "2", "--warmup", "1",
              "--repeats", "1", "--json", str(tmp_path / "t.json")])
    assert [x["row"] for x in r["rows"]] == ["ours", "hf"]
    assert all(x["ms_per_step"] > 0 and len(x["passes_ms"]) == 1 for x in r["rows"])
    assert json.loads((tmp_path / "t.json").read_text())["shape"] == [2, 8]


def test_refuses_the_gpu_rows_on_the_cpu():
    with pytest.raises(MinbertError, match="--rows ours-graph: not a row this device runs"):
        main(["--rows", "ours-graph"])


def test_a_checkpoint_with_a_small_vocabulary_is_timed(tmp_path, tiny_model):
    """Its random ids are drawn within the checkpoint's vocabulary (bert-base's 1000 to 20000 had been an index
    error in the embedding: a traceback)."""
    r = main(["--pretrained", str(tiny_model), "--seq_len", "8", "--batch_size", "2", "--steps", "2", "--warmup", "1",
              "--repeats", "1", "--rows", "ours"])
    assert [x["row"] for x in r["rows"]] == ["ours"] and r["rows"][0]["ms_per_step"] > 0


def test_a_length_beyond_the_models_positions_and_a_row_twice_are_one_line():
    """--seq_len 600 on a 512-position model had been a traceback from the embedding; --rows ours,ours timed the
    row twice."""
    with pytest.raises(MinbertError, match=r"--seq_len 600: the model has 512 positions; at most --seq_len 512"):
        main(["--config", "minilm", "--seq_len", "600"])
    with pytest.raises(MinbertError, match=r"--rows: ours is named twice"):
        main(["--config", "tiny", "--rows", "ours,ours"])
