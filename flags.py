"""Command-line flags every script shares: a parser whose errors are one line, checked numeric types,
and the speed switches of both pipelines."""
import argparse

from precision import AMP_CHOICES
from utils import MinbertError


class Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is a MinbertError: one line naming the flag, no usage dump."""

    def __init__(self, *a, **kw):
        kw.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*a, **kw)

    def error(self, message):
        raise MinbertError(f"{self.prog}: {message}")


def _number(kind, check, what):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if value != value or not check(value):  # NaN fails every check
            raise argparse.ArgumentTypeError(f"{text} must be {what}")
        return value
    parse.__name__ = what  # argparse names the type in some messages
    return parse


positive_int = _number(int, lambda v: v >= 1, "an integer >= 1")
nonneg_int = _number(int, lambda v: v >= 0, "an integer >= 0")
positive_float = _number(float, lambda v: v > 0, "a number > 0")
nonneg_float = _number(float, lambda v: v >= 0, "a number >= 0")
probability = _number(float, lambda v: 0 <= v < 1, "a probability in [0, 1)")
fraction = _number(float, lambda v: 0 <= v <= 1, "a fraction in [0, 1]")
llrd_factor = _number(float, lambda v: 0 < v <= 1, "a factor in (0, 1]")


def add_speed_flags(ap):
    """The fast-path switches both pipelines share; each fast path is on by default where it is safe."""
    g = ap.add_argument_group("speed")
    g.add_argument("--amp", choices=AMP_CHOICES, default="auto",
                   help="mixed precision. auto (default): bf16 where the hardware runs it natively (recent GPUs, "
                        "CPUs with AMX or AVX512-BF16), fp16 with a grad scaler on older GPUs, fp32 otherwise")
    g.add_argument("--attn", choices=["sdpa", "explicit"], default="sdpa", help="attention path")
    g.add_argument("--no_bucket", dest="bucket", action="store_false",
                   help="batch in plain shuffled order (default: length-bucketed batches)")
    g.add_argument("--no_foreach", dest="foreach", action="store_false",
                   help="AdamW's reference per-tensor loop instead of multi-tensor foreach kernels")
    g.add_argument("--compile", action="store_true", help="torch.compile the model")
    g.add_argument("--grad_accum", type=positive_int, default=1, help="accumulate gradients over this many batches")
    return g


def lora_targets(text):
    from lora import TARGETS
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in names if t not in TARGETS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"{text!r}: choose a comma-separated list of {','.join(TARGETS)}")
    return names


def add_adapter_flags(ap):
    """--fine-tune-mode lora|dora's settings (lora.py), the same in both pipelines."""
    g = ap.add_argument_group("adapters (--fine-tune-mode lora or dora)")
    g.add_argument("--lora_rank", type=positive_int, default=8, help="r: the adapters' rank")
    g.add_argument("--lora_alpha", type=positive_float, default=16.0, help="the update is scaled by alpha / r")
    g.add_argument("--lora_dropout", type=probability, default=0.0, help="dropout on the adapters' input")
    g.add_argument("--lora_targets", type=lora_targets, default=["query", "value"],
                   help="the linears of every layer that get adapters: any of query,key,value,attention_dense,"
                        "interm_dense,out_dense (default query,value)")
    g.add_argument("--merge", action="store_true",
                   help="fold the adapters into the weights before the final predictions (and in --eval_only), "
                        "so inference costs what the plain model does")
    return g


# Flags that shape the model's parameters: a checkpoint only fits a model built with the same values.
ADAPTER_FLAGS = {k: "--" + k for k in ("lora_rank", "lora_alpha", "lora_targets")}


def adapter_settings(args):
    """The --lora_* values a model config carries to lora.prepare_backbone."""
    return {k: getattr(args, k) for k in ("lora_rank", "lora_alpha", "lora_dropout", "lora_targets")}


# The handout's plain training: a constant learning rate, no warm-up, no clipping, no SMART.
HANDOUT_RECIPE = {"scheduler": "constant", "warmup_ratio": 0.0, "max_grad_norm": 0.0, "smart_weight": 0.0}


def add_recipe_flags(ap, smart_weight=0.0):
    """The training-recipe levers both pipelines share (schedule.py, trainer.py, smart.py), defaulting to
    the recipe measured best on MiniLM (README), and `--recipe handout`, which puts every default back to
    the handout's plain values. Only SMART's default differs between the pipelines."""
    from schedule import SCHEDULES
    g = ap.add_argument_group("training recipe")
    g.add_argument("--recipe", choices=["best", "handout"], default="best",
                   help="defaults: best (the recipe measured best, see README) or handout (its plain values: "
                        "constant lr, no warm-up or clipping, its lr, batch size, dropout and fine-tune mode); "
                        "flags given explicitly win either way")
    g.add_argument("--scheduler", choices=SCHEDULES, default="linear",
                   help="learning rate after warm-up: constant (the handout), linear or cosine decay to 0")
    g.add_argument("--warmup_ratio", type=fraction, default=0.1,
                   help="share of all optimizer steps spent warming up")
    g.add_argument("--max_grad_norm", type=nonneg_float, default=0.0,
                   help="clip the global gradient norm (0: off)")
    g.add_argument("--patience", type=nonneg_int, default=0,
                   help="stop after this many epochs without a better dev score (0: never)")
    g.add_argument("--llrd", type=llrd_factor, default=1.0,
                   help="layer-wise lr decay: layer l of L trains at lr * GAMMA^(L-1-l), embeddings at GAMMA^L")
    g.add_argument("--head_lr", type=positive_float, default=None, help="task heads' learning rate (default --lr)")
    g.add_argument("--smart_weight", type=nonneg_float, default=smart_weight,
                   help="SMART adversarial smoothness regulariser weight lambda_s (0: off; default "
                        + ("1.0 for full-model, 0 otherwise" if smart_weight is None else f"{smart_weight:g}") + ")")
    g.add_argument("--smart_eps", type=nonneg_float, default=1e-5, help="SMART's perturbation radius (inf-norm)")
    g.add_argument("--smart_step", type=nonneg_float, default=1e-3, help="SMART's ascent step size")
    g.add_argument("--smart_steps", type=positive_int, default=1, help="SMART's projected ascent steps")
    return g


def parse_with_recipe(ap, argv, handout_defaults):
    """parse_args, with the handout's defaults in force when `--recipe handout` is given."""
    import sys
    given = list(sys.argv[1:] if argv is None else argv)
    if "--recipe=handout" in given or any(a == "--recipe" and b == "handout" for a, b in zip(given, given[1:])):
        ap.set_defaults(**HANDOUT_RECIPE, **handout_defaults)
    return ap.parse_args(given)


def check_max_length(max_length, pretrained):
    """--max_length must fit the checkpoint's position embeddings: refused at start, not when a long row
    arrives mid-epoch."""
    from config import BertConfig, ConfigError
    from hub import resolve_pretrained
    ckpt = resolve_pretrained(pretrained).require("config")
    try:
        limit = BertConfig.from_json_file(ckpt.config).max_position_embeddings
    except ConfigError as e:
        raise MinbertError(str(e)) from None
    if max_length < 2:
        raise MinbertError(f"--max_length {max_length}: must be at least 2 ([CLS] and [SEP])")
    if max_length > limit:
        raise MinbertError(f"--max_length {max_length}: {pretrained} has {limit} position embeddings, "
                           f"so at most --max_length {limit}")
    return limit
