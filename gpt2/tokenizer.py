"""GPT-2's byte-level BPE tokenizer (Radford et al. 2019, section 2.2), read from a checkpoint's vocab.json
and merges.txt through the `tokenizers` package.

Byte-level: text is split by GPT-2's regular expression into words (a leading space belongs to the word), each
word's UTF-8 bytes are mapped to printable characters, and merges.txt's pairs are applied in rank order; any
string round-trips, so there is no unknown token. GPT-2 has no padding token: rows are padded on the right
with <|endoftext|>, and the attention mask marks the padding, as the course's starter does."""
import functools
import json
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from gpt2.config import ConfigError, GPT2Config
from minbert.cli import MinbertError
from minbert.files import read_text
from minbert.hub import resolve_pretrained

EOS = "<|endoftext|>"
OWN_FILES = "put the checkpoint's own vocab.json and merges.txt beside its config.json"


def _text(path, what):
    if not Path(path).is_file():
        raise MinbertError(f"{path}: GPT-2 tokenizer file not found (a GPT-2 "
                           "checkpoint folder holds vocab.json and merges.txt)")
    try:
        return read_text(path, what)
    except MinbertError as e:  # binary: not the file it should be
        raise MinbertError(f"{e}: {OWN_FILES}") from None


def read_vocab(path):
    """vocab.json: {token: id}, one line when the file is not that."""
    text = _text(path, "GPT-2 vocabulary (vocab.json)")
    try:
        vocab = json.loads(text)
    except json.JSONDecodeError as e:
        raise MinbertError(f"{path}: not JSON ({e.msg}, line {e.lineno}), so not a GPT-2 vocabulary: "
                           f"{OWN_FILES}") from None
    if not isinstance(vocab, dict) or not vocab or not all(type(i) is int and i >= 0 for i in vocab.values()):
        raise MinbertError(f"{path}: not a GPT-2 vocabulary (a JSON object of "
                           f"token: id, every id an integer >= 0): {OWN_FILES}")
    return vocab


def read_merges(path):
    """merges.txt: the (left, right) pairs in rank order, as `tokenizers` reads them (a #version line skipped,
    each other line two tokens separated by one space); one line naming the first line that is not a merge."""
    lines = _text(path, "GPT-2 merges file (merges.txt)").split("\n")
    if lines[-1] == "":  # the file's final newline
        lines.pop()
    merges = []
    for n, line in enumerate(lines, start=1):
        line = line.removesuffix("\r")
        if line.startswith("#version"):
            continue
        pair = line.split(" ")
        if len(pair) != 2:
            raise MinbertError(f"{path}: line {n} is not a merge (two tokens separated by a space), so not "
                               f"GPT-2's merges.txt: {OWN_FILES}")
        merges.append(tuple(pair))
    return merges


class GPT2Tokenizer:
    def __init__(self, vocab_file, merges_file):
        vocab, merges = read_vocab(vocab_file), read_merges(merges_file)
        try:
            self._tok = Tokenizer(models.BPE(vocab, merges))
        except Exception as e:  # tokenizers raises a bare Exception: a merge of a token the vocabulary lacks
            raise MinbertError(f"{merges_file}: does not fit {vocab_file} ({e}): {OWN_FILES}") from None
        self._tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        self._tok.decoder = decoders.ByteLevel()
        self.eos_token_id = self._tok.token_to_id(EOS)
        if self.eos_token_id is None:
            raise MinbertError(f"{vocab_file}: has no {EOS} token, so it is not a GPT-2 vocabulary")
        self.pad_token_id = self.eos_token_id
        # the embedding rows its ids need
        self.vocab_file, self.n_ids = Path(vocab_file), max(vocab.values()) + 1

    @classmethod
    def from_pretrained(cls, name_or_path, log=None):
        """The tokenizer of a --pretrained GPT-2 (a folder, or a name downloaded once), checked against the
        model's token embeddings when the folder has a config.json: more ids than rows is refused; fewer is
        said through `log` (the rows past the vocabulary are never input)."""
        ckpt = resolve_pretrained(name_or_path)
        config = None
        if ckpt.config.is_file():  # read first: a BERT folder is named as one, not by its missing vocab.json
            try:
                config = GPT2Config.from_json_file(ckpt.config)
            except ConfigError as e:
                raise MinbertError(str(e)) from None
        tok = cls(ckpt.folder / "vocab.json", ckpt.folder / "merges.txt")
        if config is not None:
            tok.check_model(config.vocab_size, ckpt.config, log)
        return tok

    def check_model(self, rows, config_path, log=None):
        n = self.n_ids
        if n > rows:
            raise MinbertError(f"{self.vocab_file}: ids up to {n - 1}, but the model has {rows} token "
                               f"embeddings (vocab_size in {config_path}): the "
                               f"tokenizer files belong to another model; {OWN_FILES}")
        if n < rows and log:
            log(f"{self.vocab_file}: ids 0-{n - 1} for the model's {rows} token embeddings: the {rows - n} "
                "rows past the vocabulary are never input, and a generated one decodes to no text")

    @functools.cached_property
    def newline_ids(self):
        """The ids of the tokens whose text holds a line break (a generated line ends at one of them)."""
        return frozenset(i for i in range(self.vocab_size)
                         if "\n" in self._tok.decode([i], skip_special_tokens=False))

    @property
    def vocab_size(self):
        return self._tok.get_vocab_size()

    def encode(self, text):
        return self._tok.encode(text).ids

    def decode(self, ids):
        return self._tok.decode(list(ids), skip_special_tokens=False)

    def token_id(self, text):
        """The id of `text` when it is one token (" yes", " no": the cloze answers); one line otherwise."""
        ids = self.encode(text)
        if len(ids) != 1:
            raise MinbertError(f"{text!r} is {len(ids)} tokens in this vocabulary, not one")
        return ids[0]

    def __call__(self, texts, max_length=None, padding=True, return_tensors="pt"):
        """{"input_ids", "attention_mask"} [B, T] for a list of strings, padded on the right to the longest
        row, each cut to its first `max_length` tokens. With return_tensors=None (as the shared datasets ask,
        which pad each batch themselves): {"input_ids", "token_type_ids"} as lists, one per text, unpadded."""
        rows = [ids[:max_length] if max_length else ids
                for ids in (e.ids for e in self._tok.encode_batch(list(texts)))]
        if return_tensors is None:
            return {"input_ids": rows, "token_type_ids": [[0] * len(r) for r in rows]}
        width = max(1, max(map(len, rows)))
        ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = torch.tensor(r, dtype=torch.long)
            mask[i, :len(r)] = 1
        return {"input_ids": ids, "attention_mask": mask}
