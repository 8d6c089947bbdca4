"""GPTPreTrainedModel: weight init, and from_pretrained that maps HF GPT-2 checkpoint names onto ours.

HF's GPT-2 stores its linears as Conv1D, whose weight is [in, out] (nn.Linear's transposed), and the query,
key and value projections as one [d, 3d] matrix (c_attn); the LM head is the token embedding itself (tied), so
a checkpoint's lm_head.weight, when present, is the same tensor as wte and is not loaded twice."""
import re

import torch

from base_bert import PreTrainedModel, load_mapped, name_fields, read_state_dict
from gpt2.config import ConfigError, GPT2Config
from minbert.cli import MinbertError
from minbert.hub import resolve_pretrained

# HF's names (after an optional 'transformer.' prefix) beside ours, {i} a layer's number and {w} weight or bias,
# and how the tensor changes on the way to ours: "T" transposes a Conv1D weight, "qkv" splits c_attn into query,
# key and value (each transposed when a weight). One table, read both ways: from_pretrained maps HF's names onto
# ours (hf_to_ours), and a folder this project writes (tools/tiny_gpt2.py) uses HF's, so that HF transformers
# loads it too (ours_to_hf).
NAMES = [
    ("wte.weight", "word_embedding.weight", None),
    ("wpe.weight", "pos_embedding.weight", None),
    ("h.{i}.ln_1.{w}", "gpt_layers.{i}.attention_layer_norm.{w}", None),
    ("h.{i}.attn.c_attn.{w}", "gpt_layers.{i}.self_attention.{p}.{w}", "qkv"),
    ("h.{i}.attn.c_proj.{w}", "gpt_layers.{i}.attention_dense.{w}", "T"),
    ("h.{i}.ln_2.{w}", "gpt_layers.{i}.out_layer_norm.{w}", None),
    ("h.{i}.mlp.c_fc.{w}", "gpt_layers.{i}.interm_dense.{w}", "T"),
    ("h.{i}.mlp.c_proj.{w}", "gpt_layers.{i}.out_dense.{w}", "T"),
    ("ln_f.{w}", "final_layer_norm.{w}", None),
]
QKV = ("query", "key", "value")
# The tied LM head, and the causal-mask buffers older checkpoints carry.
HF_IGNORED = re.compile(r"^(lm_head\.weight|h\.\d+\.attn\.(bias|masked_bias))$")


def _match(template, name):
    """The fields of `name` when all of it fits a NAMES template, else None."""
    found = name_fields(template, name, whole=True)
    return found[0] if found else None


def hf_to_ours(name, tensor):
    """[(our name, tensor)] for one HF checkpoint tensor ([] when it is one we ignore; the name unchanged when
    it is already ours, or unexpected)."""
    name = re.sub(r"^transformer\.", "", name)
    if HF_IGNORED.match(name):
        return []
    for theirs, ours, how in NAMES:
        fields = _match(theirs, name)
        if fields is None:
            continue
        weight = fields.get("w", "weight") == "weight"
        if how == "qkv":
            return [(ours.format(p=p, **fields), (t.t() if weight else t).contiguous())
                    for p, t in zip(QKV, tensor.chunk(3, dim=-1))]
        return [(ours.format(**fields), tensor.t().contiguous() if how == "T" and weight else tensor)]
    return [(name, tensor)]


def ours_to_hf(state_dict):
    """Our GPT2Model's tensors under HF's names, 'transformer.'-prefixed as GPT2LMHeadModel saves them (its LM head
    is the token embedding, so none is written): Conv1D weights transposed, query, key and value joined into
    c_attn. hf_to_ours read backwards."""
    out = {}
    for name, tensor in state_dict.items():
        for theirs, ours, how in NAMES:
            fields = _match(ours, name)
            if fields is None:
                continue
            weight = fields.get("w", "weight") == "weight"
            hf = "transformer." + theirs.format(**fields)
            if how == "qkv":
                if fields["p"] == QKV[0]:
                    parts = [state_dict[ours.format(**{**fields, "p": p})] for p in QKV]
                    out[hf] = torch.cat([t.t() if weight else t for t in parts], dim=-1).contiguous()
            else:
                out[hf] = tensor.t().contiguous() if how == "T" and weight else tensor.contiguous()
            break
        else:
            raise KeyError(f"{name}: not a tensor of GPT2Model")
    return out


class GPTPreTrainedModel(PreTrainedModel):
    config_class = GPT2Config

    @classmethod
    def from_pretrained(cls, name_or_path, **config_overrides):
        """Build from a local folder in HF's layout (config.json and model.safetensors or pytorch_model.bin);
        overrides go to the config (e.g. attn_impl='explicit')."""
        ckpt = resolve_pretrained(name_or_path).require("config", "weights")
        try:
            config = GPT2Config.from_json_file(ckpt.config, **config_overrides)
        except ConfigError as e:
            raise MinbertError(str(e)) from None
        return cls(config).load_pretrained_weights(read_state_dict(ckpt.weights), source=ckpt.weights)

    def load_pretrained_weights(self, state_dict, source="checkpoint"):
        """Copy a (foreign-named) state dict in; every missing, unexpected or mis-shaped tensor is named."""
        return load_mapped(self, state_dict, hf_to_ours, source)
