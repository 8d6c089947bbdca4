"""pretrain.py: --max_steps, bad input and a binary --texts file are one line; MiniLM pretrained further passes the
sanity check."""
import json
import subprocess
import sys

import pytest

import pretrain
from tests.course import ROOT, pretrain_args
from utils import MinbertError


def test_max_steps_and_bad_input(tmp_path, tiny_model):
    out = pretrain.main(pretrain_args(tmp_path, tiny_model, tmp_path / "short", "--epochs", "3", "--max_steps", "5"))
    log = [json.loads(l) for l in (out / "pretrain-log.jsonl").read_text().splitlines()]
    assert log[-1]["total_steps"] == 5 and log[-1]["epoch"] == 0
    with pytest.raises(MinbertError, match="--texts .*nope.txt: text file not found"):
        pretrain.main(["--pretrained", str(tiny_model), "--texts", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "x")])
    with pytest.raises(MinbertError, match=r"--texts .*: is a folder; give the text file itself"):
        pretrain.main(["--pretrained", str(tiny_model), "--texts", str(tmp_path), "--out", str(tmp_path / "x")])
    with pytest.raises(MinbertError, match=r"--mask_prob 0.0: masks no token, so there is nothing to predict"):
        pretrain.main(pretrain_args(tmp_path, tiny_model, tmp_path / "m0", "--mask_prob", "0"))
    assert not (tmp_path / "m0").exists()


def test_pretrained_minilm_passes_sanity_check(tmp_path):
    """A few MLM steps on MiniLM (fresh head): the folder loads in sanity_check.py, checked against its own
    weights in NumPy."""
    out = pretrain.main(pretrain_args(tmp_path, "all-minilm-l6-v2", tmp_path / "mini", "--epochs", "1", "--max_steps", "2"))
    done = subprocess.run([sys.executable, "sanity_check.py", "--pretrained", str(out)], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Your BERT implementation is correct!" in done.stdout


def test_a_binary_texts_file_is_one_line(tmp_path, tiny_model):
    binary = tmp_path / "texts.bin"
    binary.write_bytes(b"good movie\n\xff\xfe\x00\x01 bytes")
    with pytest.raises(MinbertError, match=r"texts.bin: line 2: byte 0xFF is not UTF-8 text"):
        pretrain.main(["--pretrained", str(tiny_model), "--texts", str(binary), "--out", str(tmp_path / "x")])
