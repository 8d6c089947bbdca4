"""gpt2/tokenizer.py: our byte-level BPE equals HF's GPT2TokenizerFast on a vocabulary trained here on the sonnets,
over every course sentence and sonnet line (ids, and decoding back to the text); padding and the cloze answers."""
import csv

import pytest

from gpt2.tokenizer import GPT2Tokenizer
from tests.helpers import real_data_folder, train_gpt2_vocab
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


def test_equals_hf_on_every_course_sentence_and_sonnet_line(tmp_path):
    from transformers import GPT2TokenizerFast
    folder = real_data_folder()
    sonnet_folder = real_data_folder("sonnets.txt")
    sonnets = (sonnet_folder / "sonnets.txt").read_text(encoding="utf-8").splitlines()
    train_gpt2_vocab(tmp_path, sonnets, vocab_size=2000)
    ours = GPT2Tokenizer.from_pretrained(tmp_path)
    theirs = GPT2TokenizerFast.from_pretrained(tmp_path)  # HF reads the same vocab.json and merges.txt
    texts = _course_texts(folder, sonnet_folder)
    assert len(texts) > 50_000
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
