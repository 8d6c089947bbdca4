"""gpt2/tokenizer.py: our byte-level BPE equals HF's GPT2TokenizerFast on a vocabulary trained here on the sonnets,
over the course sentences and sonnet lines (ids, and decoding back to the text); padding and the cloze answers."""
import csv

import pytest

from gpt2.tokenizer import GPT2Tokenizer
from tests.checkpoints import train_gpt2_vocab
from tests.course import ROOT, real_data_folder
from utils import MinbertError


def _course_texts(folder, sonnet_folder):
    texts = []
    for path in sorted(folder.glob("*.csv")):
        with open(path, encoding="utf-8", newline="") as fp:
            for row in csv.DictReader(fp, delimiter="\t"):
                texts += [row[c] for c in ("sentence", "sentence1", "sentence2") if row.get(c)]
    for path in sorted(sonnet_folder.glob("*sonnets*.txt")):
        texts += path.read_text(encoding="utf-8").splitlines()
    return texts


def test_equals_hf_on_every_unusual_course_sentence_and_a_quarter_of_the_rest(tmp_path):
    """Every course sentence and sonnet line with a character beyond plain letters, digits, single spaces and
    , . ? ! ' (where the byte-level split and the merges could part), and every fourth of the others (plain
    words, which the merges treat alike): 36,000 texts of the 70,000 distinct ones."""
    import re
    from transformers import GPT2TokenizerFast
    folder = real_data_folder()
    sonnet_folder = real_data_folder("sonnets.txt")
    sonnets = (sonnet_folder / "sonnets.txt").read_text(encoding="utf-8").splitlines()
    train_gpt2_vocab(tmp_path, sonnets, vocab_size=2000)
    ours = GPT2Tokenizer.from_pretrained(tmp_path)
    theirs = GPT2TokenizerFast.from_pretrained(tmp_path)  # HF reads the same vocab.json and merges.txt
    plain = re.compile(r"[A-Za-z0-9 ,.?!']*")
    distinct = list(dict.fromkeys(_course_texts(folder, sonnet_folder)))
    unusual = [t for t in distinct if not plain.fullmatch(t) or "  " in t or t != t.strip()]
    texts = unusual + [t for t in distinct if plain.fullmatch(t) and "  " not in t and t == t.strip()][::4]
    assert len(unusual) > 20_000 and len(texts) > 30_000
    ids = ours._tok.encode_batch(texts)
    expected = theirs(texts)["input_ids"]
    for text, got, want in zip(texts, ids, expected):
        assert got.ids == want, text
    for text, got in zip(texts[::50], ids[::50]):
        assert ours.decode(got.ids) == text == theirs.decode(got.ids)


def test_rows_are_padded_on_the_right_with_eos_and_masked(tiny_gpt2):
    tok = GPT2Tokenizer.from_pretrained(tiny_gpt2)
    batch = tok(["love doth bear", "time"], max_length=2)
    n = len(tok.encode("time"))
    assert n == 1 and batch["input_ids"].shape == (2, 2)  # the first row cut to 2 tokens, the second padded
    assert batch["attention_mask"].tolist() == [[1, 1], [1, 0]]
    assert (batch["input_ids"][batch["attention_mask"] == 0] == tok.eos_token_id).all()
    assert tok.token_id(" love") == tok.encode(" love")[0]
    with pytest.raises(MinbertError, match="is 3 tokens in this vocabulary, not one"):
        tok.token_id("zqx")


def test_a_folder_without_the_vocabulary_is_named(tmp_path):
    with pytest.raises(MinbertError, match="vocab.json: GPT-2 tokenizer file not found"):
        GPT2Tokenizer.from_pretrained(tmp_path)


def _copy(src, dest, **files):
    """A copy of checkpoint folder `src` with some of its files' bytes replaced."""
    import shutil
    shutil.copytree(src, dest)
    for name, data in files.items():
        (dest / name.replace("_", ".")).write_bytes(data)
    return dest


@pytest.mark.parametrize("files, message", [
    ({"vocab_json": b"not json {"}, r"vocab.json: not JSON \(Expecting value, line 1\), so not a GPT-2 vocabulary"),
    ({"vocab_json": b'["a", "b"]'}, r"vocab.json: not a GPT-2 vocabulary \(a JSON object of token: id"),
    ({"vocab_json": b"\xff\xfe{}"}, r"vocab.json: line 1: byte 0xFF is not UTF-8 text \(save the GPT-2 vocabulary "
                                     r"\(vocab.json\) as UTF-8\)"),
    ({"merges_txt": b"\x00\xff garbage\n"}, r"merges.txt: not a text file, so not a GPT-2 merges file"),
    ({"merges_txt": b"#version: 0.2\nt h\nthree tokens here\n"}, r"merges.txt: line 3 is not a merge"),
    ({"merges_txt": b"#version: 0.2\nzz qq\n"}, r"merges.txt: does not fit .*vocab.json \(.*zz.* out of vocabulary\)"),
])
def test_a_broken_vocabulary_or_merges_file_is_one_line_naming_it(tmp_path, tiny_gpt2, files, message):
    folder = _copy(tiny_gpt2, tmp_path / "broken", **files)
    with pytest.raises(MinbertError, match=message) as e:
        GPT2Tokenizer.from_pretrained(folder)
    assert "\n" not in str(e.value) and "put the checkpoint's own vocab.json and merges.txt" in str(e.value)


def test_a_vocabulary_larger_than_the_models_embeddings_is_refused_a_smaller_one_said(tmp_path):
    from tests.checkpoints import make_gpt2_checkpoint
    n = GPT2Tokenizer.from_pretrained(make_gpt2_checkpoint(tmp_path / "same")).vocab_size
    with pytest.raises(MinbertError, match=rf"vocab.json: ids up to {n - 1}, but the model has {n - 3} token "
                                           r"embeddings \(vocab_size in .*config.json\)"):
        GPT2Tokenizer.from_pretrained(make_gpt2_checkpoint(tmp_path / "big", vocab_size=n - 3))
    said = []
    GPT2Tokenizer.from_pretrained(make_gpt2_checkpoint(tmp_path / "small", vocab_size=n + 5), log=said.append)
    assert len(said) == 1 and f"ids 0-{n - 1} for the model's {n + 5} token embeddings: the 5 rows past" in said[0]


def test_a_hub_name_reads_the_downloaded_folder(tmp_path, tiny_gpt2, monkeypatch):
    """--pretrained gpt2: the files of the cached download, not a folder named gpt2 (the package, from the project
    folder)."""
    import shutil
    shutil.copytree(tiny_gpt2, tmp_path / "cache" / "openai-community--gpt2")
    monkeypatch.setenv("MINBERT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MINBERT_OFFLINE", "1")
    monkeypatch.chdir(ROOT)
    hub, folder = GPT2Tokenizer.from_pretrained("gpt2"), GPT2Tokenizer.from_pretrained(tiny_gpt2)
    assert hub.encode(" love doth") == folder.encode(" love doth")
