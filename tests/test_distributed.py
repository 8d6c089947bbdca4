"""Data-parallel runs under torchrun (2 CPU processes, gloo) equal one process with the same global batch."""
import os
import subprocess
import sys

import pytest
import torch

from conftest import ROOT, make_hf_checkpoint, tiny_config, write_course_data

# fp32 whatever the CPU: on one with native bf16, --amp auto trains in bf16, where the ranks' different
# summation order is rounded to bf16 and the two runs drift apart by more than the tolerance below.
FP32 = ["--amp", "none"]
# and no SMART: its random perturbation is drawn per rank for that rank's half of the batch, so N ranks draw
# other numbers than one process does (as dropout would; the tiny checkpoint trains without dropout here)
NO_NOISE = FP32 + ["--smart_weight", "0"]


@pytest.fixture
def setup(tmp_path):
    # 45 examples at batch 8: the last global batch (5) splits unevenly over the two ranks
    data = write_course_data(tmp_path / "data", n_train=45)
    model, _ = make_hf_checkpoint(tmp_path / "tiny", config=tiny_config(hidden_dropout_prob=0.0,
                                                                         attention_probs_dropout_prob=0.0))
    return tmp_path, data, model


def _run(tmp_path, script, args, nproc):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(nproc),
                "--standalone"] if nproc > 1 else [sys.executable]
    out = subprocess.run([*launcher, str(ROOT / script), *args], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    return out.stdout


def _same_weights(a, b):
    sa, sb = torch.load(a, weights_only=True)["model"], torch.load(b, weights_only=True)["model"]
    assert sa.keys() == sb.keys()
    worst = max(sa, key=lambda k: (sa[k] - sb[k]).abs().max().item())
    diff = (sa[worst] - sb[worst]).abs().max().item()
    assert all(torch.allclose(sa[k], sb[k], atol=1e-5, rtol=1e-4) for k in sa), f"{worst}: max |diff| {diff:.3g}"


def test_classifier_ddp_equals_single_process(setup):
    tmp, data, model = setup
    args = ["--pretrained", str(model), "--data_dir", str(data), "--datasets", "sst", "--epochs", "2",
            "--batch_size", "8", "--fine-tune-mode", "full-model", "--lr", "1e-3", "--hidden_dropout_prob", "0",
            *NO_NOISE]
    _run(tmp, "classifier.py", args + ["--checkpoint_dir", "one", "--predictions_dir", "p1"], 1)
    out = _run(tmp, "classifier.py", args + ["--checkpoint_dir", "two", "--predictions_dir", "p2"], 2)
    assert out.count("sst epoch 1:") == 1  # only rank 0 logs
    _same_weights(tmp / "one" / "full-model-sst-last.pt", tmp / "two" / "full-model-sst-last.pt")
    assert len((tmp / "two" / "full-model-sst-log.jsonl").read_text().splitlines()) == 2
    assert (tmp / "p2" / "full-model-sst-test-out.csv").read_text() == (tmp / "p1" / "full-model-sst-test-out.csv").read_text()


def test_multitask_ddp_equals_single_process(setup):
    tmp, data, model = setup
    args = ["--pretrained", str(model), "--data_dir", str(data), "--epochs", "2", "--batch_size", "8",
            "--fine-tune-mode", "full-model", "--lr", "1e-3", "--hidden_dropout_prob", "0", *NO_NOISE]

    def outs(d):
        return [x for t in ("sst", "para", "sts") for s in ("dev", "test")
                for x in (f"--{t}_{s}_out", f"{d}/{t}-{s}-output.csv")]
    _run(tmp, "multitask_classifier.py", args + ["--checkpoint", "one/mt.pt", "--results", "one/r.csv", *outs("one")], 1)
    out = _run(tmp, "multitask_classifier.py", args + ["--checkpoint", "two/mt.pt", "--results", "two/r.csv",
                                                       *outs("two")], 2)
    assert out.count("predictions copied to") == 1
    _same_weights(tmp / "one" / "mt.pt", tmp / "two" / "mt.pt")
    assert len((tmp / "two" / "r.csv").read_text().splitlines()) == 2


def test_an_error_under_torchrun_is_said_once(setup):
    tmp, data, model = setup
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
                          str(ROOT / "multitask_classifier.py"), "--pretrained", str(model), "--data_dir",
                          str(data / "absent")], cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode != 0
    errors = [l for l in out.stderr.splitlines() if l.startswith("error: ")]
    assert len(errors) == 1 and "data file not found" in errors[0], out.stderr[-3000:]
