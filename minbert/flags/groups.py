"""The flag groups several scripts share, declared once: speed switches, adapter settings, the training recipe
and its regularisers, the run folder. Defaults that are decisions live in defaults.py."""
import argparse
from pathlib import Path

from minbert.flags import types
from minbert.flags.types import (fraction, llrd_factor, lora_scale, lora_targets, nonneg_float, nonneg_int,
                                 positive_float, positive_int, probability)
from minbert.objectives.regularizers import REGULARIZERS
from minbert.precision import AMP_CHOICES
from minbert.runs.folders import check_path_name, check_run_name
from minbert.training.schedule import SCHEDULES
from optimizer import OPTIMIZERS


# The levers of the groups below that reach into BERT's own modules, which a script on another backbone
# (GPT-2's) leaves out (bert=False), and why: typed there, each is this one line (utils.Parser's
# `absent`), not "unrecognized".
NOT_GPT2 = "not available for GPT-2; drop it"
BERT_ONLY = {
    "--no_fast_dropout": "switches off minBERT's bulk dropout masks, which "
                         "GPT-2 does not use (its dropout is torch's): " + NOT_GPT2,
    # the regularisers GPT-2 does not take (their rows say why): the weight, and each flag shaping the term
    **{f"--{f.dest}": (f"({r.gpt2}): " if f is r.flags[0] else
                       f"{f.what or 'shapes ' + r.label}, which GPT-2 does not have ({r.gpt2}): ") + NOT_GPT2
       for r in REGULARIZERS.values() if r.gpt2 for f in r.flags},
    "--freeze_layers": "(freezing runs BERT's lower layers without a graph): " + NOT_GPT2,
    "--gradual_unfreeze": "(freezing runs BERT's lower layers without a graph): " + NOT_GPT2,
    "--llrd": "(layer-wise rates as measured for BERT): " + NOT_GPT2,
}


def add_speed_flags(ap, training=True, bert=True):
    """The fast-path switches; each fast path is on by default where it is safe. Inference alone
    (training=False) takes only the ones that act there; bert=False leaves out BERT's own (BERT_ONLY)."""
    g = ap.add_argument_group("speed")
    g.add_argument("--amp", choices=AMP_CHOICES, default="auto",
                   help="mixed precision. auto (default): bf16 where the hardware runs it natively (recent "
                        "GPUs, CPUs with AMX or AVX512-BF16), fp16 with "
                        "a grad scaler on older GPUs, fp32 otherwise")
    g.add_argument("--attn", choices=["sdpa", "explicit"], default="sdpa", help="attention path")
    g.add_argument("--pad_multiple", type=nonneg_int, default=None, metavar="N",
                   help="pad each batch to a multiple of N tokens, so that a few fixed shapes recur "
                        "(default: 16 on a GPU, 0 = to the batch's longest "
                        "row on the CPU, where padding costs compute)")
    if not training:
        return g
    g.add_argument("--no_bucket", dest="bucket", action="store_false",
                   help="batch in plain shuffled order (default: length-bucketed batches)")
    g.add_argument("--no_foreach", dest="foreach", action="store_false",
                   help="AdamW's reference loop, Algorithm 1 line by line one "
                        "tensor at a time (default: one fused pass over each tensor)")
    g.add_argument("--no_fused", dest="fused", action="store_false",
                   help="AdamW as one multi-tensor kernel per line of Algorithm 1 instead of one fused pass "
                        "over each tensor (the same arithmetic)")
    if bert:
        g.add_argument("--no_fast_dropout", dest="fast_dropout", action="store_false",
                       help="torch's dropout, one random draw per element (default: masks drawn in bulk on "
                            "the CPU, minbert/dropout.py; a GPU always uses torch's)")
    g.add_argument("--compile", action="store_true",
                   help="torch.compile the model (Inductor's fused kernels); on a GPU inside the recorded step, "
                        "AdamW's update compiled too: fastest for long runs, after about 100 s of compiling")
    g.add_argument("--no_record_step", dest="record_step", action="store_false",
                   help="with --use_gpu, run the training step eagerly, kernel by kernel (default on a GPU: "
                        "the whole step, forward to optimizer, recorded once per batch shape as a CUDA graph "
                        "and replayed, 3-7x faster on an H100; minbert/training/recorded.py)")
    g.add_argument("--grad_accum", type=positive_int, default=1, help="accumulate gradients "
                                                                      "over this many batches")
    return g


def add_adapter_flags(ap):
    """The settings of the modes that train new weights on a frozen BERT (minbert/finetuning/modes.py), the
    same in both pipelines."""
    g = ap.add_argument_group("adapters (--fine-tune-mode lora, dora, adapter or prefix)")
    g.add_argument("--lora_rank", type=positive_int, default=8, help="r: the adapters' rank, at most the "
                                                                     "hidden size (the rank B A can have)")
    g.add_argument("--lora_alpha", type=lora_scale, default=16.0, help="the update is scaled by alpha / r")
    g.add_argument("--lora_dropout", type=probability, default=0.0, help="dropout on the adapters' input")
    g.add_argument("--lora_targets", type=lora_targets, default=["query", "value"],
                   help="the linears of every layer that get adapters: any of "
                        "query,key,value,attention_dense,interm_dense,out_dense (default query,value)")
    g.add_argument("--adapter_dim", type=positive_int, default=64,
                   help="--fine-tune-mode adapter: the width m of the Houlsby bottleneck adapters "
                        "(minbert/finetuning/houlsby.py)")
    g.add_argument("--prefix_length", type=positive_int, default=10,
                   help="--fine-tune-mode prefix: the number of trainable keys and values in every layer "
                        "(minbert/finetuning/prefix.py)")
    g.add_argument("--merge", action="store_true",
                   help="fold LoRA/DoRA adapters into the weights (a prefix: drop its MLP) before the final "
                        "predictions (and in --eval_only), so inference costs what the plain model does")
    return g


def add_recipe_flags(ap, regularizers, full_model_only=False, bert=True):
    """The training-recipe levers both pipelines share (minbert/training/, minbert/objectives/), defaulting to
    the recipe measured best on MiniLM (RESULTS.md), and `--recipe handout`, which puts every default back
    to the handout's plain values; bert=False leaves out BERT's own (BERT_ONLY)."""
    g = ap.add_argument_group("training recipe")
    g.add_argument("--recipe", choices=["best", "handout"], default="best",
                   help="defaults: best (the recipe measured best, see RESULTS.md) or handout (its plain "
                        "values: constant lr, no warm-up or clipping, its lr, batch size, dropout and "
                        "fine-tune mode); flags given explicitly win either way")
    g.add_argument("--scheduler", choices=SCHEDULES, default="linear",
                   help="learning rate after warm-up: constant (the handout), linear or cosine decay to 0")
    g.add_argument("--warmup_ratio", type=fraction, default=0.1,
                   help="share of all optimizer steps spent warming up")
    g.add_argument("--max_grad_norm", type=nonneg_float, default=0.0,
                   help="clip the global gradient norm (0: off)")
    g.add_argument("--patience", type=nonneg_int, default=0,
                   help="stop after this many epochs without a better dev score (0: never)")
    if bert:
        g.add_argument("--llrd", type=llrd_factor, default=1.0,
                       help="layer-wise lr decay: layer l of L trains "
                            "at lr * GAMMA^(L-1-l), embeddings at GAMMA^L")
    g.add_argument("--head_lr", type=positive_float, default=None, help="task heads' learning "
                                                                        "rate (default --lr)")
    g.add_argument("--weight_decay", type=nonneg_float, default=0.0, help="the optimizer's "
                                                                          "decoupled weight decay")
    g.add_argument("--optimizer", choices=list(OPTIMIZERS), default="adamw",
                   help="adamw (the handout's), lion (Chen et al. 2023; default lr a third of AdamW's) or "
                        "lamb (You et al. 2020; default lr five times AdamW's): optimizer.py")
    if bert:
        g.add_argument("--freeze_layers", type=nonneg_int, default=0,
                       help="keep the embeddings and the K lowest BERT layers frozen for the whole run (0: "
                            "none; minbert/finetuning/freezing.py)")
        g.add_argument("--gradual_unfreeze", type=nonneg_int, default=0, metavar="STEPS",
                       help="gradual unfreezing (Howard and Ruder 2018): start with BERT frozen, then "
                            "unfreeze one more layer from the top every STEPS optimizer steps, the "
                            "embeddings last (0: off; minbert/finetuning/freezing.py)")
    add_regularizer_flags(g, regularizers, full_model_only, bert)
    return g


def _weight_default(weight, full_model_only):
    if full_model_only:
        return f"{weight:g} for full-model, 0 otherwise" if weight else "0"
    return f"{weight:g}"


def add_regularizer_flags(g, defaults, full_model_only=False, bert=True):
    """Every regulariser's flags, one row of objectives/regularizers.py's REGULARIZERS each: the pipelines'
    recipe, and bench.py, which times their step. `defaults` gives the weights ({flag: value},
    DEFAULT_REGULARIZERS's; a weight it leaves out defaults as its settings field does, to 0); with
    full_model_only they default to None here and the parser resolves them once the fine-tune mode is known;
    bert=False leaves out the rows GPT-2 does not take (BERT_ONLY)."""
    for r in REGULARIZERS.values():
        if r.gpt2 and not bert:
            continue
        for f in r.flags:
            kind = ({"action": "store_true"} if f.kind == "switch" else {"choices": list(f.kind)}
                    if isinstance(f.kind, tuple) else {"type": getattr(types, f.kind), "default": f.default})
            text = f.help
            if f is r.flags[0]:  # the weight: 0 is off
                weight = defaults.get(f.dest, f.default)
                kind["default"] = None if full_model_only else weight
                text += f" (0: off; default {_weight_default(weight, full_model_only)})"
            elif "choices" in kind:
                kind["default"] = f.default
            g.add_argument(f"--{f.dest}", help=text, **kind)
    return g


def add_run_flags(ap, prefix, checkpoint_alias):
    """Where a run's files go (one spelling in both pipelines: --run_name or --run_dir) and --resume."""
    g = ap.add_argument_group("run folder")
    g.add_argument("--run_name", default="", action=RunFolder,
                   help=f"the run's folder under runs/ (default: {prefix}-TIMESTAMP); "
                        "an existing one is refused unless --resume")
    g.add_argument("--run_dir", default=None, action=RunFolder,
                   help="the run's folder anywhere (instead of "
                        "runs/RUN_NAME): checkpoints, log and predictions")
    g.add_argument("--resume", action="store_true",
                   help="continue from the last completed epoch (of "
                        "--run_name / --run_dir, else the newest run)")
    add_backup_flag(g)
    add_tensorboard_flag(g)
    if checkpoint_alias == "--checkpoint_dir":  # the earlier spellings
        g.add_argument("--checkpoint_dir", dest="run_dir", action=RunFolder, help=argparse.SUPPRESS)
    else:
        g.add_argument("--checkpoint", dest="run_dir", action=RunFolder, help=argparse.SUPPRESS)
    ap.set_defaults(checkpoint_name=None)
    return g


def add_zip_flags(ap):
    """prepare_submit.py's (minBERT's and Build GPT-2's): which runs' files go in, a mix allowed, --backup."""
    ap.add_argument("--publish", nargs="+", default=(), metavar="RUN_DIR",
                    help="first copy these run folders' prediction files to the handout's paths (a finished "
                         "run's set, put back as the run published it)")
    ap.add_argument("--mixed", action="store_true",
                    help="zip even when files one model writes together come from different runs (or partly "
                         "from no run found); without it such a mix is refused, naming each file's run")
    add_backup_flag(ap)


def add_backup_flag(ap):
    ap.add_argument("--backup", action="store_true",
                    help="where an output would replace a file no run wrote (or one changed since), keep "
                         "that file as NAME.DATE.bak beside it instead of stopping (minbert/runs/outputs.py)")


def add_tensorboard_flag(ap):
    ap.add_argument("--no_tensorboard", dest="tensorboard", action="store_false",
                    help="write no TensorBoard event files into the run folder "
                         "(default: written, minbert/training/monitor.py)")


class RunFolder(argparse.Action):
    """--run_name, --run_dir and their earlier spellings --checkpoint_dir (Part 1) and --checkpoint PATH
    (Part 2: the folder is PATH's, the best checkpoint PATH itself) all say where the run's files go. Of
    two naming different folders, argparse would keep one and drop the other without a word: the second is
    refused. The same folder twice is taken (the printed resume command adds the folder's flag to a
    command that may name it already)."""

    def __call__(self, parser, namespace, value, option_string=None):
        # '' would fall back on a new timestamped folder without a word; a name has its own limits (check_run_name)
        (check_run_name if option_string == "--run_name" else check_path_name)(value, option_string)
        name = value if option_string == "--run_name" else ""
        folder, stem = (str(Path(value).parent), Path(value).stem) if option_string == "--checkpoint" else (
            None if name else value, None)
        given = (getattr(namespace, "run_name", ""), getattr(namespace, "run_dir", None),
                 getattr(namespace, "checkpoint_name", None))
        if any(given[:2]) and not self.same(given, name, folder, stem):
            spellings = [o for o in ("--run_name", "--run_dir", "--checkpoint_dir", "--checkpoint")
                         if o in parser._option_string_actions]
            raise argparse.ArgumentError(self, "the run's folder is given already "
                                               f"({f'--run_name {given[0]}' if given[0] else given[1]}): "
                                               f"{', '.join(spellings[:-1])} and "
                                               f"{spellings[-1]} each name it; give one")
        if name:
            namespace.run_name = name
        else:
            namespace.run_dir = folder
        if stem is not None:
            namespace.checkpoint_name = stem

    @staticmethod
    def same(given, name, folder, stem):
        """Whether a flag naming `name` (under runs/) or `folder` (and the best checkpoint `stem`) names the
        folder (and checkpoint) `given` (run_name, run_dir, checkpoint_name) already named."""
        if given[0] or name:
            return given[0] == name
        return Path(given[1]) == Path(folder) and (None in (given[2], stem) or given[2] == stem)
