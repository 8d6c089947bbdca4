"""BERT configuration: the bert-base-uncased defaults, read from / written to config.json."""
import json
from dataclasses import dataclass, field, fields, asdict


class ConfigError(ValueError):
    pass


# What a BERT script says of a GPT-2 checkpoint folder (its config's model_type, or
# its vocab.json and merges.txt).
GPT2_NOT_BERT = ("a GPT-2 checkpoint (model_type 'gpt2'), not a BERT one: the Build GPT-2 scripts take it "
                 "(cd gpt2 && python classifier.py --pretrained FOLDER for Part 1; paraphrase_detection.py "
                 "or sonnet_generation.py for Part 2)")


class ConfigFile:
    """Reading a config dataclass (one with an `extra` field) from a dict or a config.json; BertConfig's and
    gpt2/config.py's GPT2Config."""

    @classmethod
    def from_dict(cls, d, **overrides):
        """The dataclass's fields by name, every other key kept in `extra` (a round trip keeps it)."""
        d = {**d, **overrides}
        known = {f.name for f in fields(cls)} - {"extra"}
        extra = {**d.pop("extra", {}), **{k: v for k, v in d.items() if k not in known}}
        return cls(**{k: v for k, v in d.items() if k in known}, extra=extra)

    @classmethod
    def from_json_file(cls, path, **overrides):
        """from_dict of the JSON file at `path`; every problem is a ConfigError naming the file."""
        try:
            with open(path) as fp:
                d = json.load(fp)
        except FileNotFoundError:
            raise ConfigError(f"{path}: config file not found") from None
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}: not valid JSON ({e})") from None
        try:
            return cls.from_dict(d, **overrides)
        except (ConfigError, TypeError) as e:
            raise ConfigError(f"{path}: {e}") from None

    def check_types(self, names=None):
        """Every field holds a value of its declared type (an int where a float is expected is taken
        as one): one ConfigError naming the first field that does not, as config.json spells it
        (`names`: ours -> the file's)."""
        for f in fields(self):
            if f.name == "extra":
                continue
            v = getattr(self, f.name)
            want = f.type if isinstance(f.type, type) else {"int": int, "float": float, "str": str,
                                                            "bool": bool}[f.type]
            if want is float and isinstance(v, int) and not isinstance(v, bool):
                v = float(v)
                setattr(self, f.name, v)
            if not isinstance(v, want) or (isinstance(v, bool) and want is not bool):
                raise ConfigError(f"config field {(names or {}).get(f.name, f.name)!r} must be "
                                  f"{want.__name__}, got {v!r} ({type(v).__name__})")


@dataclass
class BertConfig(ConfigFile):
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    # Runtime choices, not part of the checkpoint: 'sdpa' (fused kernel) or 'explicit' (equation 1), and
    # dropout's masks drawn in bulk on the CPU (minbert/dropout.py) or by torch.
    attn_impl: str = "sdpa"
    fast_dropout: bool = True
    # Keys of a config.json we do not use (architectures, model_type, ...) survive a round trip.
    extra: dict = field(default_factory=dict)

    def __post_init__(self):
        if self.extra.get("model_type") == "gpt2":  # before its fields: GPT-2's pad_token_id is None
            raise ConfigError(GPT2_NOT_BERT)
        self.check_types()
        if self.hidden_size % self.num_attention_heads:
            raise ConfigError(f"hidden_size {self.hidden_size} is not divisible by "
                              f"num_attention_heads {self.num_attention_heads}")
        if self.hidden_act != "gelu":
            raise ConfigError(f"hidden_act {self.hidden_act!r} is not supported (only 'gelu')")
        if self.attn_impl not in ("sdpa", "explicit"):
            raise ConfigError(f"attn_impl must be 'sdpa' or 'explicit', got {self.attn_impl!r}")

    def to_dict(self):
        d = asdict(self)
        extra = d.pop("extra")
        d.pop("attn_impl")
        d.pop("fast_dropout")
        return {**extra, **d}

    def to_json_file(self, path):
        with open(path, "w") as fp:
            json.dump(self.to_dict(), fp, indent=2, sort_keys=True)
            fp.write("\n")


# BERT shapes by name, for a model of random weights (bench.py --config): bert-base's (BertConfig's defaults),
# all-MiniLM-L6-v2's, and a tiny one.
SHAPES = {
    "base": {},
    "minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536),
    "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512),
}
