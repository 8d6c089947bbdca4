"""sanity_check.py: our BERT against an independent NumPy forward pass (which catches a wrong model), against a
saved reference in the course's format, and on the real MiniLM weights."""
import subprocess
import sys

import pytest
import torch

from tests.helpers import ROOT, make_hf_checkpoint, tiny_config


@pytest.fixture
def wide_vocab_checkpoint(tmp_path):
    """The tiny checkpoint with bert-base-uncased's vocabulary size (the handout's inputs use its ids)."""
    # the handout's example ids go up to 17953: a tiny model with a full-size vocabulary
    return make_hf_checkpoint(tmp_path / "tiny-bert", config=tiny_config(vocab_size=20000))


def _run(*args):
    return subprocess.run([sys.executable, "sanity_check.py", *args], cwd=ROOT, capture_output=True, text=True)


def test_passes_on_a_hub_layout_checkpoint(wide_vocab_checkpoint):
    folder, _ = wide_vocab_checkpoint
    out = _run("--pretrained", str(folder))
    assert out.returncode == 0, out.stderr
    assert "Your BERT implementation is correct!" in out.stdout


def test_numpy_reference_catches_a_wrong_model(wide_vocab_checkpoint, monkeypatch):
    """Break one thing in our model (ReLU for GELU in one layer); the independent NumPy pass must notice."""
    import sanity_check
    from bert import BertModel
    folder, _ = wide_vocab_checkpoint
    model = BertModel.from_pretrained(folder).eval()
    model.bert_layers[1].interm_af = torch.nn.ReLU()
    ids = torch.tensor(sanity_check.INPUT_IDS)
    mask = (ids != 0).long()
    with torch.no_grad():
        ours = {k: v.numpy() for k, v in model(ids, mask).items()}
    from base_bert import hf_to_ours, read_state_dict
    w = {hf_to_ours(k): v.double().numpy() for k, v in read_state_dict(folder / "model.safetensors").items()
         if hf_to_ours(k)}
    ref = sanity_check.numpy_bert(w, model.config, ids.numpy(), mask.numpy())
    problems = sanity_check.compare(ours, ref, mask.numpy())
    assert problems and problems[0].startswith("last_hidden_state")


def test_reference_file_in_course_format(wide_vocab_checkpoint, tmp_path):
    from bert import BertModel
    import sanity_check
    folder, _ = wide_vocab_checkpoint
    model = BertModel.from_pretrained(folder).eval()
    ids = torch.tensor(sanity_check.INPUT_IDS)
    with torch.no_grad():
        out = model(ids, (ids != 0).long())
    torch.save({k: v.clone() for k, v in out.items()}, tmp_path / "sanity_check.data")
    ok = _run("--pretrained", str(folder), "--reference", str(tmp_path / "sanity_check.data"))
    assert ok.returncode == 0 and "correct" in ok.stdout, ok.stderr
    out["pooler_output"][1, 3] += 0.01
    torch.save(out, tmp_path / "bad.data")
    bad = _run("--pretrained", str(folder), "--reference", str(tmp_path / "bad.data"))
    assert bad.returncode == 2
    assert "pooler_output: 1 of" in bad.stderr and "max |diff| 0.01" in bad.stderr
    assert "Traceback" not in bad.stderr
    # a file without the two outputs is named before any model is built (a hub name that cannot resolve here)
    torch.save({"hidden": out["last_hidden_state"]}, tmp_path / "other.data")
    other = _run("--pretrained", "no-such-org/no-such-model", "--reference", str(tmp_path / "other.data"))
    assert other.returncode == 2 and other.stderr.strip() == (
        f"error: --reference {tmp_path / 'other.data'}: lacks last_hidden_state and pooler_output (it holds hidden); "
        f"a reference is a dict of the two outputs")


def test_real_minilm_weights():
    out = _run("--pretrained", "all-minilm-l6-v2")
    assert out.returncode == 0, out.stderr
    assert "Your BERT implementation is correct!" in out.stdout
