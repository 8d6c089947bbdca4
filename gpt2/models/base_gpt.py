"""GPTPreTrainedModel: weight init, and from_pretrained that maps HF GPT-2 checkpoint names onto ours.

HF's GPT-2 stores its linears as Conv1D, whose weight is [in, out] (nn.Linear's transposed), and the query,
key and value projections as one [d, 3d] matrix (c_attn); the LM head is the token embedding itself (tied), so
a checkpoint's lm_head.weight, when present, is the same tensor as wte and is not loaded twice."""
import re

from base_bert import PreTrainedModel, load_mapped, read_state_dict
from gpt2.config import ConfigError, GPT2Config
from minbert.hub import resolve_pretrained
from utils import MinbertError

# HF name (after an optional 'transformer.' prefix) -> our name, and how the tensor changes on the way:
# "T" transposes a Conv1D weight, "qkv" splits c_attn into query, key and value (each transposed when a
# weight).
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
    """[(our name, tensor)] for one HF checkpoint tensor ([] when it is one we ignore; the name unchanged when
    it is already ours, or unexpected)."""
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
            return [(new.format(p), (t.t() if weight else t).contiguous()) for p, t in zip(("query", "key",
                                                                                            "value"), parts)]
        return [(new, tensor.t().contiguous() if how == "T" and weight else tensor)]
    return [(name, tensor)]


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
