"""GPT2Config: gpt2 (small)'s defaults, in the handout's names, read from an HF config.json.

HF's GPT-2 config spells the sizes n_embd, n_layer, n_head, n_positions, n_inner and the dropouts resid_pdrop,
attn_pdrop, embd_pdrop; `from_dict` maps them onto these names in one table."""
from dataclasses import asdict, dataclass, field

from config import ConfigError, ConfigFile


# HF name -> ours.
HF_NAMES = {"n_embd": "hidden_size", "n_layer": "num_hidden_layers", "n_head": "num_attention_heads",
            "n_positions": "max_position_embeddings", "n_inner": "intermediate_size",
            "resid_pdrop": "hidden_dropout_prob", "attn_pdrop": "attention_probs_dropout_prob",
            "embd_pdrop": "embed_dropout_prob", "layer_norm_epsilon": "layer_norm_eps"}


@dataclass
class GPT2Config(ConfigFile):
    vocab_size: int = 50257
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    max_position_embeddings: int = 1024
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    embed_dropout_prob: float = 0.1
    layer_norm_eps: float = 1e-5
    initializer_range: float = 0.02
    eos_token_id: int = 50256
    # Runtime choice, not part of the checkpoint: 'sdpa' (fused kernel) or 'explicit'
    # (CausalSelfAttention.attention).
    attn_impl: str = "sdpa"
    extra: dict = field(default_factory=dict)  # keys of config.json we do not use survive a round trip

    def __post_init__(self):
        kind = self.extra.get("model_type", "gpt2")
        if kind != "gpt2":  # a BERT checkpoint shares our names (hidden_size, ...) and would otherwise pass
            raise ConfigError(f"a {kind} checkpoint (model_type {kind!r}), not a GPT-2 one: a BERT is for "
                              "the minBERT scripts at the project's top (classifier.py, "
                              "multitask_classifier.py); give the GPT-2 scripts a GPT-2 folder in HF's "
                              "layout, or gpt2, gpt2-medium, gpt2-large or gpt2-xl")
        theirs = {v: k for k, v in HF_NAMES.items()}
        self.check_types(theirs)
        small = [f"{theirs.get(k, k)} {v}" for k, v in vars(self).items()
                 if type(v) is int and v < (0 if k == "eos_token_id" else 1)]
        if small:
            raise ConfigError(f"{small[0]}: a size must be at least 1")
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(f"hidden_size {self.hidden_size} is not divisible by num_attention_heads "
                              f"{self.num_attention_heads}")
        if self.attn_impl not in ("sdpa", "explicit"):
            raise ConfigError(f"attn_impl must be 'sdpa' or 'explicit', got {self.attn_impl!r}")
        act = self.extra.get("activation_function", "gelu_new")
        if act not in ("gelu_new", "gelu_pytorch_tanh"):
            raise ConfigError(f"activation_function {act!r} is not supported "
                              "(GPT-2's is gelu_new, tanh-approximated)")

    @classmethod
    def from_dict(cls, d, **overrides):
        d = {HF_NAMES.get(k, k): v for k, v in d.items()}
        if d.get("intermediate_size") is None:  # HF's n_inner None means 4 x the width
            d["intermediate_size"] = 4 * d.get("hidden_size", cls.hidden_size)
        return super().from_dict(d, **overrides)

    def to_dict(self):
        """In HF's names, so that HF transformers reads the folder too."""
        d = asdict(self)
        extra, _ = d.pop("extra"), d.pop("attn_impl")
        ours = {v: k for k, v in HF_NAMES.items()}
        return {"model_type": "gpt2", "activation_function": "gelu_new", **extra,
                **{ours.get(k, k): v for k, v in d.items()}}
