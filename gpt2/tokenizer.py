"""GPT-2's byte-level BPE tokenizer (Radford et al. 2019, section 2.2), read from a checkpoint's vocab.json and
merges.txt through the `tokenizers` package.

Byte-level: text is split by GPT-2's regular expression into words (a leading space belongs to the word), each
word's UTF-8 bytes are mapped to printable characters, and merges.txt's pairs are applied in rank order; any
string round-trips, so there is no unknown token. GPT-2 has no padding token: rows are padded on the right with
<|endoftext|>, and the attention mask marks the padding, as the course's starter does."""
import functools
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from utils import MinbertError

EOS = "<|endoftext|>"


class GPT2Tokenizer:
    def __init__(self, vocab_file, merges_file):
        for path in (vocab_file, merges_file):
            if not Path(path).is_file():
                raise MinbertError(f"{path}: GPT-2 tokenizer file not found (a GPT-2 checkpoint folder holds vocab.json "
                                   f"and merges.txt)")
        self._tok = Tokenizer(models.BPE.from_file(str(vocab_file), str(merges_file)))
        self._tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        self._tok.decoder = decoders.ByteLevel()
        self.eos_token_id = self._tok.token_to_id(EOS)
        if self.eos_token_id is None:
            raise MinbertError(f"{vocab_file}: has no {EOS} token, so it is not a GPT-2 vocabulary")
        self.pad_token_id = self.eos_token_id

    @classmethod
    def from_pretrained(cls, folder):
        return cls(Path(folder) / "vocab.json", Path(folder) / "merges.txt")

    @functools.cached_property
    def newline_ids(self):
        """The ids of the tokens whose text holds a line break (a generated line ends at one of them)."""
        return frozenset(i for i in range(self.vocab_size) if "\n" in self._tok.decode([i], skip_special_tokens=False))

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
        """{"input_ids", "attention_mask"} [B, T] for a list of strings, padded on the right to the longest row,
        each cut to its first `max_length` tokens. With return_tensors=None (as the shared datasets ask, which pad
        each batch themselves): {"input_ids", "token_type_ids"} as lists, one per text, unpadded."""
        rows = [ids[:max_length] if max_length else ids for ids in (e.ids for e in self._tok.encode_batch(list(texts)))]
        if return_tensors is None:
            return {"input_ids": rows, "token_type_ids": [[0] * len(r) for r in rows]}
        width = max(1, max(map(len, rows)))
        ids = torch.full((len(rows), width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            ids[i, :len(r)] = torch.tensor(r, dtype=torch.long)
            mask[i, :len(r)] = 1
        return {"input_ids": ids, "attention_mask": mask}
