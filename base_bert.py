"""BertPreTrainedModel: weight init, and from_pretrained that maps HF checkpoint names onto ours."""
import re
from pathlib import Path

import torch
import torch.nn as nn

from config import BertConfig, ConfigError
from minbert.safe_load import refuse_code, safe_load
from minbert.hub import cache_dir, resolve_pretrained
from utils import MinbertError

# HF's checkpoint names (after the 'bert.' prefix) beside ours, {i} a layer's number and {p} query, key or value.
# One table, read both ways: from_pretrained maps HF's names onto ours (hf_to_ours), and a checkpoint folder this
# project writes (pretrain.py's) uses HF's, so that HF transformers loads it too (ours_to_hf).
NAMES = [
    ("embeddings.word_embeddings.", "word_embedding."),
    ("embeddings.position_embeddings.", "pos_embedding."),
    ("embeddings.token_type_embeddings.", "tk_type_embedding."),
    ("embeddings.LayerNorm.", "embed_layer_norm."),
    ("encoder.layer.{i}.attention.self.{p}.", "bert_layers.{i}.self_attention.{p}."),
    ("encoder.layer.{i}.attention.output.dense.", "bert_layers.{i}.attention_dense."),
    ("encoder.layer.{i}.attention.output.LayerNorm.", "bert_layers.{i}.attention_layer_norm."),
    ("encoder.layer.{i}.intermediate.dense.", "bert_layers.{i}.interm_dense."),
    ("encoder.layer.{i}.output.dense.", "bert_layers.{i}.out_dense."),
    ("encoder.layer.{i}.output.LayerNorm.", "bert_layers.{i}.out_layer_norm."),
    ("pooler.dense.", "pooler_dense."),
]
# Tensors a BERT checkpoint may carry that a bare encoder has no use for: pretraining heads, buffers.
HF_IGNORED = re.compile(r"^(cls\.|embeddings\.position_ids$)")
# The pretraining heads' tensors (minbert/tasks/mlm.py), {head: {our name: HF's name}}: the masked-LM head
# (its decoder is tied to the word embeddings, so only its bias is its own) and the next-sentence head on
# the pooled [CLS] (BertForPreTraining's seq_relationship). The encoder loader above skips them.
HF_HEADS = {
    "mlm": {"dense.weight": "cls.predictions.transform.dense.weight",
            "dense.bias": "cls.predictions.transform.dense.bias",
            "layer_norm.weight": "cls.predictions.transform.LayerNorm.weight",
            "layer_norm.bias": "cls.predictions.transform.LayerNorm.bias",
            "bias": "cls.predictions.bias"},
    "nsp": {"weight": "cls.seq_relationship.weight", "bias": "cls.seq_relationship.bias"},
}


# What a name table's fields stand for: a layer's number, an attention projection, a weight or a bias.
FIELDS = {"i": r"\d+", "p": "query|key|value", "w": "weight|bias"}


def name_fields(template, name, whole=False):
    """(the fields, the length matched) of `name` where its start (all of it, with `whole`) fits `template` (a
    name table's entry, {i}, {p} and {w} its fields: FIELDS), else None. Both models' name tables read it."""
    rx = re.escape(template)
    for field, values in FIELDS.items():
        rx = rx.replace(re.escape("{" + field + "}"), f"(?P<{field}>{values})")
    m = (re.fullmatch if whole else re.match)(rx, name)
    return (m.groupdict(), m.end()) if m else None


def _rename(name, table):
    """`name` with the start matching a (from, to) pair's `from` replaced by its `to`, or None."""
    for source, target in table:
        found = name_fields(source, name)
        if found:
            fields, end = found
            return target.format(**fields) + name[end:]
    return None


def hf_to_ours(name):
    """Our parameter name for an HF checkpoint tensor name, or None if it is one we ignore."""
    name = re.sub(r"^bert\.", "", name)
    if HF_IGNORED.match(name):
        return None
    name = re.sub(r"\.gamma$", ".weight", re.sub(r"\.beta$", ".bias", name))
    return _rename(name, NAMES) or name  # else already one of ours (saved by this code), or unexpected


def ours_to_hf(name):
    """The HF checkpoint name (BertForPreTraining's, 'bert.' prefixed) of one of our encoder's tensors."""
    hf = _rename(name, [(ours, theirs) for theirs, ours in NAMES])
    if hf is None:
        raise KeyError(f"{name}: not a tensor of BERT's encoder")
    return "bert." + hf


def read_state_dict(path):
    """Load a .safetensors or torch .bin state dict (tensors only: loading runs no code); a damaged file is
    named in the error, with what to do about it."""
    # Only a file in our download cache can be fetched again; a user's own folder must not be deleted.
    in_cache = cache_dir().resolve() in Path(path).resolve().parents
    advice = (f"; the file is damaged or not a checkpoint, "
              f"{'delete it to download it again' if in_cache else 'replace it with a good copy'}")
    if str(path).endswith(".safetensors"):
        from safetensors.torch import load_file
        try:
            return load_file(str(path))
        except Exception as e:
            raise MinbertError(f"{path}: cannot read the weights "
                               f"({type(e).__name__}: {str(e)[:200]}){advice}") from None
    state, culprit = safe_load(path, "the weights", advice=advice)
    if culprit is not None:
        raise refuse_code(path, culprit)
    return state


def init_module(module, std):
    """The BERT/GPT-2 initialisation of one module: N(0, std) weights, zero biases (and
    padding row), unit LayerNorms."""
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=std)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
    if isinstance(module, nn.Embedding) and module.padding_idx is not None:
        with torch.no_grad():
            module.weight[module.padding_idx].zero_()
    if isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


def load_mapped(model, state_dict, mapping, source="checkpoint"):
    """Copy a foreign-named state dict into `model`: `mapping(name, tensor)` gives [(our name,
    tensor)] for each checkpoint tensor ([] to ignore it). Every missing, unexpected or mis-shaped
    tensor is named in one line."""
    ours = model.state_dict()
    mapped, unexpected = {}, []
    for k, v in state_dict.items():
        for new, t in mapping(k, v):
            (mapped.__setitem__(new, t) if new in ours else unexpected.append(k))
    missing = [k for k in ours if k not in mapped]
    misshaped = [f"{k} (checkpoint {list(mapped[k].shape)}, model {list(ours[k].shape)})"
                 for k in ours if k in mapped and mapped[k].shape != ours[k].shape]
    problems = [f"{len(x)} {what}: " + ", ".join(x[:n]) + (" ..." if len(x) > n else "")
                for what, x, n in (("mis-shaped", misshaped, 4), ("missing", missing, 6),
                                   ("unexpected", unexpected, 6)) if x]
    if problems:
        raise MinbertError(f"{source} does not fit the model (hidden_size {model.config.hidden_size}, "
                           f"{model.config.num_hidden_layers} layers): " + "; ".join(problems))
    with torch.no_grad():
        for k, v in mapped.items():
            ours[k].copy_(v)
    return model


class PreTrainedModel(nn.Module):
    """A model with a config and the shared initialisation (BERT here, GPT-2 in gpt2/models/base_gpt.py)."""

    def __init__(self, config):
        super().__init__()
        self.config = config

    def init_weights(self):
        self.apply(lambda m: init_module(m, self.config.initializer_range))


class BertPreTrainedModel(PreTrainedModel):
    config_class = BertConfig

    @classmethod
    def from_pretrained(cls, name_or_path, **config_overrides):
        """Build from a hub name, the packaged MiniLM, or a local folder/file; overrides go to the config
        (e.g. hidden_dropout_prob=0.3, attn_impl='explicit')."""
        ckpt = resolve_pretrained(name_or_path).require("config", "weights")
        try:
            config = BertConfig.from_json_file(ckpt.config, **config_overrides)
        except ConfigError as e:
            raise MinbertError(str(e)) from None
        model = cls(config)
        model.load_pretrained_weights(read_state_dict(ckpt.weights), source=ckpt.weights)
        return model

    def load_pretrained_weights(self, state_dict, source="checkpoint"):
        """Copy a (foreign-named) state dict in; every missing, unexpected or mis-shaped tensor is named."""
        def mapping(name, tensor):
            new = hf_to_ours(name)
            return [] if new is None else [(new, tensor)]
        return load_mapped(self, state_dict, mapping, source)
