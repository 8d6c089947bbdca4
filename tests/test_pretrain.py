"""pretrain.py: --max_steps, bad input and a binary --texts file are one line, --nsp's too (on the task sentences, on
text of one-sentence documents or of one document, --corpus beside --texts); MiniLM pretrained further passes the
sanity check."""
import json

import pytest

import pretrain
from tests.course import pretrain_args, pretrain_texts
from tests.processes import run_main
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
    with pytest.raises(MinbertError, match=r"--mask_prob 0.0 --nsp 1: masks no token, so the masked LM has nothing "
                                           r"to predict .*next-sentence prediction alone is no pretraining"):
        pretrain.main(pretrain_args(tmp_path, tiny_model, tmp_path / "m0", "--mask_prob", "0", "--nsp", "1"))
    assert not (tmp_path / "m0").exists()


def test_pretrained_minilm_passes_sanity_check(tmp_path):
    """A few MLM steps on MiniLM (fresh head): the folder loads in sanity_check.py, checked against its own
    weights in NumPy."""
    out = pretrain.main(pretrain_args(tmp_path, "all-minilm-l6-v2", tmp_path / "mini", "--epochs", "1", "--max_steps", "2"))
    done = run_main("sanity_check.py", "--pretrained", str(out))
    assert done.returncode == 0, done.stderr
    assert "Your BERT implementation is correct!" in done.stdout


def test_a_binary_texts_file_is_one_line(tmp_path, tiny_model):
    binary = tmp_path / "texts.bin"
    binary.write_bytes(b"good movie\n\xff\xfe\x00\x01 bytes")
    with pytest.raises(MinbertError, match=r"texts.bin: not a text file, so not a --texts file .*a NUL byte on line 2"):
        pretrain.main(["--pretrained", str(tiny_model), "--texts", str(binary), "--out", str(tmp_path / "x")])
    binary.write_bytes("good movie\ncaf\u00e9\n".encode("latin-1"))  # text, but not UTF-8
    with pytest.raises(MinbertError, match=r"texts.bin: line 2: byte 0xE9 is not UTF-8 text \(save the --texts file "):
        pretrain.main(["--pretrained", str(tiny_model), "--texts", str(binary), "--out", str(tmp_path / "x")])


def test_next_sentence_prediction_on_text_without_documents_is_one_line(tmp_path, tiny_model, course_data):
    """The course fixture's reviews are one sentence each; the task sentences are no documents at all; a --texts
    file without blank lines is one document. Each is refused before anything trains, and no folder is left."""
    single = tmp_path / "single.txt"
    single.write_text("a good film\n\nthe movie\n\nfun\n")
    out = tmp_path / "out"
    cases = [(["--data_dir", str(course_data), "--nsp", "1"], r"ids-cfimdb-train.csv: no document has two "
                                                               r"sentences, so no sentence has a next one to predict"),
             (["--data_dir", str(course_data), "--nsp", "1", "--corpus", "tasks"],
              r"^--nsp 1 --corpus tasks: the task sentences are single sentences, not documents"),
             (["--texts", str(single), "--nsp", "0.5"], r"single.txt: no document has two sentences"),
             (["--texts", str(pretrain_texts(tmp_path)), "--nsp", "1"], r"texts.txt: 1 document\(s\); --nsp holds out whole "
                                                                        r"documents"),
             (["--texts", str(single), "--corpus", "cfimdb"], r"^--corpus picks the text, which --texts replaces")]
    for flags, message in cases:
        with pytest.raises(MinbertError, match=message):
            pretrain.main(["--pretrained", str(tiny_model), "--out", str(out), *flags])
        assert not out.exists()
