"""BertTokenizer: bert-base-uncased WordPiece, on top of the `tokenizers` package's Rust kernels."""
import numpy as np
import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

from minbert.hub import resolve_pretrained
from utils import MinbertError


class BertTokenizer:
    def __init__(self, vocab_file, do_lower_case=True, model_max_length=512):
        try:
            with open(vocab_file, encoding="utf-8") as fp:
                tokens = [line.rstrip("\n") for line in fp]
        except FileNotFoundError:
            raise MinbertError(f"{vocab_file}: vocabulary file not found") from None
        except UnicodeDecodeError as e:
            raise MinbertError(f"{vocab_file}: byte 0x{e.object[e.start]:02X} is not UTF-8 text, so not a BERT "
                               "vocabulary (one word piece a line, UTF-8)") from None
        self.vocab = {t: i for i, t in enumerate(tokens) if t}
        for special in ("[PAD]", "[UNK]", "[CLS]", "[SEP]"):
            if special not in self.vocab:
                raise MinbertError(f"{vocab_file}: not a BERT vocabulary, token {special} is missing")
        self.ids_to_tokens = {i: t for t, i in self.vocab.items()}
        self.model_max_length = model_max_length
        self.pad_token_id, self.unk_token_id = self.vocab["[PAD]"], self.vocab["[UNK]"]
        self.cls_token_id, self.sep_token_id = self.vocab["[CLS]"], self.vocab["[SEP]"]

        tok = Tokenizer(models.WordPiece(self.vocab, unk_token="[UNK]", max_input_chars_per_word=100))
        # Uncased BERT: clean control chars, split CJK characters, lower-case and strip accents.
        tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=True,
                                                    strip_accents=None, lowercase=do_lower_case)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", self.cls_token_id), ("[SEP]", self.sep_token_id)])
        tok.decoder = decoders.WordPiece(prefix="##")
        # Registered specials stay whole when they appear in text, and `decode` can skip them.
        tok.add_special_tokens([t for t in ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]") if t in self.vocab])
        self._tok = tok

    @classmethod
    def from_pretrained(cls, name_or_path, **kwargs):
        return cls(resolve_pretrained(name_or_path).require("vocab").vocab, **kwargs)

    def __len__(self):
        return len(self.vocab)

    def tokenize(self, text):
        return self._tok.encode(text, add_special_tokens=False).tokens

    def convert_tokens_to_ids(self, tokens):
        if isinstance(tokens, str):
            return self.vocab.get(tokens, self.unk_token_id)
        return [self.vocab.get(t, self.unk_token_id) for t in tokens]

    def convert_ids_to_tokens(self, ids):
        if isinstance(ids, int):
            return self.ids_to_tokens[ids]
        return [self.ids_to_tokens[int(i)] for i in ids]

    def encode(self, text, text_pair=None, add_special_tokens=True):
        return self._tok.encode(text, text_pair, add_special_tokens=add_special_tokens).ids

    def decode(self, ids, skip_special_tokens=True):
        return self._tok.decode([int(i) for i in ids], skip_special_tokens=skip_special_tokens)

    def __call__(self, text, text_pair=None, padding=True, truncation=True, max_length=None,
                 return_tensors="pt"):
        """Encode one sentence or a batch (optionally of pairs); pad to the longest in the batch."""
        single = isinstance(text, str)
        texts = [text] if single else list(text)
        pairs = None if text_pair is None else ([text_pair] if single else list(text_pair))
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"{len(texts)} first sentences but {len(pairs)} second sentences")
        if max_length is None:
            max_length = self.model_max_length
        elif max_length < 2:  # room for [CLS] and [SEP] at least; 0 must not quietly mean 'the default'
            raise ValueError(f"max_length must be at least 2, got {max_length}")
        if truncation:
            if self._tok.truncation is None or self._tok.truncation["max_length"] != max_length:
                self._tok.enable_truncation(max_length, strategy="longest_first")
        elif self._tok.truncation is not None:
            self._tok.no_truncation()
        inputs = texts if pairs is None else list(zip(texts, pairs))
        encs = self._tok.encode_batch(inputs)
        width = max(len(e.ids) for e in encs)
        if not padding and len({len(e.ids) for e in encs}) > 1 and return_tensors:
            raise ValueError("sentences of different lengths need padding=True to become one tensor")
        ids = np.full((len(encs), width), self.pad_token_id, dtype=np.int64)
        types = np.zeros((len(encs), width), dtype=np.int64)
        mask = np.zeros((len(encs), width), dtype=np.int64)
        for i, e in enumerate(encs):
            n = len(e.ids)
            ids[i, :n], types[i, :n], mask[i, :n] = e.ids, e.type_ids, 1
        out = {"input_ids": ids, "token_type_ids": types, "attention_mask": mask}
        if return_tensors == "pt":
            out = {k: torch.from_numpy(v) for k, v in out.items()}
        elif return_tensors is None:
            out = {k: [row[:len(e.ids)].tolist() for row, e in zip(v, encs)] for k, v in out.items()}
            if single:
                out = {k: v[0] for k, v in out.items()}
        return out
