"""gpt2/sanity_check.py: run from the gpt2 folder as the handout writes it, against HF's model and against a
saved reference; a wrong model fails in one line."""

import torch

from tests.course import ROOT
from tests.processes import run_main


def _run(*args):
    return run_main("gpt2/sanity_check.py", *args, cwd=ROOT / "gpt2")


def test_passes_against_hf_and_a_saved_reference_and_fails_on_a_changed_one(tiny_gpt2, tmp_path):
    ok = _run("--pretrained", str(tiny_gpt2))
    assert ok.returncode == 0 and "Your GPT-2 implementation is correct!" in ok.stdout, ok.stderr[-2000:]
    assert "Loading weights" not in ok.stderr  # HF's progress bar stays out of the check's output
    weights = next(p for p in tiny_gpt2.iterdir() if p.suffix in (".safetensors", ".bin"))
    ok = _run("--pretrained", str(weights))  # its weights file, as the pipelines take it (HF had been given it)
    assert ok.returncode == 0 and "Your GPT-2 implementation is correct!" in ok.stdout, ok.stderr[-2000:]
    from transformers import GPT2Model
    ids = torch.tensor([[5, 17, 42, 8, 3, 11, 29, 2], [7, 1, 13, 21, 9, 0, 0, 0]])
    mask = torch.tensor([[1] * 8, [1] * 5 + [0] * 3])
    with torch.no_grad():
        out = GPT2Model.from_pretrained(tiny_gpt2).eval()(ids, attention_mask=mask).last_hidden_state
    torch.save({"last_hidden_state": out}, tmp_path / "ref.pt")
    assert _run("--pretrained", str(tiny_gpt2), "--reference", str(tmp_path / "ref.pt")).returncode == 0
    out[0, 3, 1] += 0.01
    torch.save({"last_hidden_state": out}, tmp_path / "bad.pt")
    bad = _run("--pretrained", str(tiny_gpt2), "--reference", str(tmp_path / "bad.pt"))
    assert bad.returncode == 2 and bad.stderr.startswith("error: GPT2Model differs from") and "Traceback" not in bad.stderr
