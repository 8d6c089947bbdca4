"""GPTPreTrainedModel: weight init, and from_pretrained that maps HF GPT-2 checkpoint names onto ours.

HF's GPT-2 stores its linears as Conv1D, whose weight is [in, out] (nn.Linear's transposed), and the query, key
and value projections as one [d, 3d] matrix (c_attn); the LM head is the token embedding itself (tied), so a
checkpoint's lm_head.weight, when present, is the same tensor as wte and is not loaded twice."""
import re

import torch
import torch.nn as nn

from base_bert import read_state_dict
from gpt2.config import ConfigError, GPT2Config
from minbert.hub import resolve_pretrained
from utils import MinbertError

# HF name (after an optional 'transformer.' prefix) -> our name, and how the tensor changes on the way:
# "T" transposes a Conv1D weight, "qkv" splits c_attn into query, key and value (each transposed when a weight).
HF_TO_OURS = [
    (r"wte\.weight", "word_embedding.weight", None),
    (r"wpe\.weight", "pos_embedding.weight", None),
    (r"h\.(\d+)\.ln_1\.(weight|bias)", r"gpt_layers.\1.attention_layer_norm.\2", None),
    (r"h\.(\d+)\.attn\.c_attn\.(weight|bias)", r"gpt_layers.\1.self_attention.{}.\2", "qkv"),
    (r"h\.(\d+)\.attn\.c_proj\.(weight|bias)", r"gpt_layers.\1.attention_dense.\2", "T"),
    (r"h\.(\d+)\.ln_2\.(weight|bias)", r"gpt_layers.\1.out_layer_norm.\2", None),
    (r"h\.(\d+)\.mlp\.c_fc\.(weight|bias)", r"gpt_layers.\1.interm_dense.\2", "T"),
    (r"h\.(\d+)\.mlp\.c_proj\.(weight|bias)", r"gpt_layers.\1.out_dense.\2", "T"),
    (r"ln_f\.(weight|bias)", r"final_layer_norm.\1", None),
]
# The tied LM head, and the causal-mask buffers older checkpoints carry.
HF_IGNORED = re.compile(r"^(lm_head\.weight|h\.\d+\.attn\.(bias|masked_bias))$")


def hf_to_ours(name, tensor):
    """[(our name, tensor)] for one HF checkpoint tensor ([] when it is one we ignore; the name unchanged when it
    is already ours, or unexpected)."""
    name = re.sub(r"^transformer\.", "", name)
    if HF_IGNORED.match(name):
        return []
    for pattern, repl, how in HF_TO_OURS:
        m = re.fullmatch(pattern, name)
        if not m:
            continue
        new = m.expand(repl)
        weight = name.endswith("weight")
        if how == "qkv":
            parts = tensor.chunk(3, dim=-1)
            return [(new.format(p), (t.t() if weight else t).contiguous()) for p, t in zip(("query", "key", "value"), parts)]
        return [(new, tensor.t().contiguous() if how == "T" and weight else tensor)]
    return [(name, tensor)]


class GPTPreTrainedModel(nn.Module):
    config_class = GPT2Config

    def __init__(self, config):
        super().__init__()
        self.config = config

    def init_weights(self):
        self.apply(self._init_module)

    def _init_module(self, module):
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=std)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)
        if isinstance(module, nn.LayerNorm):
            nn.init.ones_(module.weight)
            nn.init.zeros_(module.bias)

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
        ours = self.state_dict()
        mapped, unexpected = {}, []
        for k, v in state_dict.items():
            for new, t in hf_to_ours(k, v):
                (mapped.__setitem__(new, t) if new in ours else unexpected.append(k))
        missing = [k for k in ours if k not in mapped]
        misshaped = [f"{k} (checkpoint {list(mapped[k].shape)}, model {list(ours[k].shape)})"
                     for k in ours if k in mapped and mapped[k].shape != ours[k].shape]
        problems = [f"{len(x)} {what}: " + ", ".join(x[:4]) + (" ..." if len(x) > 4 else "")
                    for what, x in (("mis-shaped", misshaped), ("missing", missing), ("unexpected", unexpected)) if x]
        if problems:
            raise MinbertError(f"{source} does not fit the model (hidden_size {self.config.hidden_size}, "
                               f"{self.config.num_hidden_layers} layers): " + "; ".join(problems))
        with torch.no_grad():
            for k, v in mapped.items():
                ours[k].copy_(v)
        return self
