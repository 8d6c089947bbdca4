"""Every pipeline's command-line flags, declared once: a parser whose errors are one line, checked numeric
types, the groups the pipelines share, and the three pipeline parsers (classifier.py, multitask_classifier.py,
pretrain.py). They live here, not in the scripts, so that sweep.py, tools/ and the generated docs/flags.md
read the same declarations the scripts parse.

Which flags define a run (and must agree when it is resumed) is declared once, as the complement of
RUN_FREE: the flags that only say where files go or how fast the same computation runs.
"""
import argparse
import math
import sys
from pathlib import Path

from datasets import TASK_PREFIX, data_file
from finetune import ADAPTER_LR, ADAPTER_MODES, FINE_TUNE_MODES, NEW_WEIGHT_MODES, check_merge
from lora import TARGETS
from optimizer import LR_FACTOR, OPTIMIZERS
from precision import AMP_CHOICES
from utils import MinbertError, Parser, distributed  # noqa: F401 (Parser: the scripts' parser class)


def _number(kind, check, what):
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        if not math.isfinite(value) or not check(value):  # NaN and infinity mean no run anyone wants
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
momentum = _number(float, lambda v: 0 <= v < 1, "a momentum in [0, 1)")
# NumPy's legacy seeding (np.random.seed) takes 0 .. 2**32 - 1, so a seed outside would fail mid-start.
seed = _number(int, lambda v: 0 <= v < 2 ** 32, "an integer from 0 to 4294967295 (2**32 - 1)")


def given_flags(parser, argv):
    """The destinations of the flags actually typed in `argv` (not those left at their defaults)."""
    saved = {a.dest: a.default for a in parser._actions}
    try:
        for a in parser._actions:
            a.default = argparse.SUPPRESS
        return set(vars(parser.parse_args(list(argv))))
    finally:
        for a in parser._actions:
            a.default = saved[a.dest]


# Flags that may differ between an interrupted run and its resumption: where files go, which device, and
# how fast the same computation runs. Every other flag defines the run.
RUN_FREE = {"use_gpu", "amp", "attn", "pad_multiple", "compile", "foreach", "resume", "run_name", "run_dir", "checkpoint",
            "checkpoint_name", "predictions_dir", "results", "eval_only", "merge", "tensorboard",
            "datasets", "out"} | {f"{p}_{s}_out" for p in ("sst", "para", "sts") for s in ("dev", "test")}
# Flags naming the files a run reads. Where they are may change (a data folder moved or copied); what they hold
# may not: a run records its inputs' sha256 (run_defining's `inputs`), and a resumption compares those.
PATH_FLAGS = {"data_dir", "texts", "extra_task", "distill"} | {f"{p}_{s}" for p in ("sst", "para", "sts")
                                                                 for s in ("train", "dev", "test")}


def run_defining(args, inputs=None):
    """{flag: value} of the flags that define `args`' run, as plain values, and under "inputs" the sha256 of
    each file it reads ({what: path} in `inputs`). A --pretrained that is a local folder counts by its files'
    contents too (the folder may move); a hub or packaged name counts as the name."""
    from checkpoint import plain
    from utils import file_digest
    flags = {k: plain(v) for k, v in sorted(vars(args).items()) if k not in RUN_FREE | PATH_FLAGS}
    inputs = dict(inputs or {})
    if "pretrained" in flags and Path(flags["pretrained"]).is_dir():
        from hub import resolve_pretrained
        ckpt = resolve_pretrained(flags.pop("pretrained")).require("config", "vocab", "weights")
        inputs.update({"--pretrained config.json": ckpt.config, "--pretrained vocab.txt": ckpt.vocab,
                       "--pretrained weights": ckpt.weights})
    flags["inputs"] = {what: {"path": str(path), "sha256": file_digest(path)} for what, path in sorted(inputs.items())}
    return flags


def check_same_run(saved, now, source, log=print):
    """Refuse to resume a run whose run-defining flags (`saved`) differ from this one's (`now`), naming each
    difference, or whose input files hold other bytes than the ones it was trained on. An input found at a
    new path with the same bytes (a data folder moved or copied) is said in one line and accepted. A
    checkpoint of an earlier minbert, which recorded paths rather than contents, is not held to its paths."""
    keys = (set(saved) | set(now)) - RUN_FREE - PATH_FLAGS - {"inputs"}
    def differs(k):  # a --no_X switch stores X as True when it was not given
        if flag_spelling(k).startswith("--no_"):
            return f"{flag_spelling(k)} {'not given' if saved.get(k) else 'given'} in the checkpoint's run, " \
                   f"{'not given' if now.get(k) else 'given'} now"
        return f"{flag_spelling(k)} {saved.get(k)!r} in the checkpoint, {now.get(k)!r} given"
    diff = [differs(k) for k in sorted(keys) if saved.get(k) != now.get(k)]
    was, new = saved.get("inputs") or {}, now.get("inputs") or {}
    if was:  # an earlier minbert recorded no inputs
        diff += [f"the run read {what} ({was[what]['path']}), this one does not" for what in sorted(set(was) - set(new))]
        diff += [f"this run reads {what} ({new[what]['path']}), the checkpoint's did not" for what in sorted(set(new) - set(was))]
    moved = []
    for what in sorted(set(was) & set(new)):
        if was[what]["sha256"] != new[what]["sha256"]:
            diff.append(f"the {what} file {new[what]['path']} holds other contents than {was[what]['path']}, which the "
                        f"run was trained on")
        elif was[what]["path"] != new[what]["path"]:
            moved.append(f"{was[what]['path']} -> {new[what]['path']}")
    if diff:
        raise MinbertError(f"{source}: cannot resume, the checkpoint comes from another configuration: "
                           + "; ".join(diff))
    if moved:
        log(f"resuming with input files that moved, their contents unchanged: {', '.join(moved[:3])}"
            + (f" and {len(moved) - 3} more" if len(moved) > 3 else ""))


# ----------------------------------------------------------------------------- flags a configuration ignores

def _adapters(a, typed):
    return a.fine_tune_mode in ADAPTER_MODES


# Flags that act only in some configurations: {flag: (acts(args, typed flags), what it does and when)}. Typed
# where it would change nothing, a flag is refused in one line: a flag silently ignored makes a run the
# user did not mean to make.
IDLE_FLAGS = {
    **{f: (_adapters, "sets the adapters, which only --fine-tune-mode lora or dora adds")
       for f in ("lora_rank", "lora_alpha", "lora_dropout", "lora_targets")},
    "llrd": (lambda a, t: a.fine_tune_mode != "last-linear-layer",
             "scales the learning rates of BERT's layers, which --fine-tune-mode last-linear-layer freezes"),
    **{f: (lambda a, t: a.smart_weight > 0, "shapes SMART's adversarial term, which is off without --smart_weight above 0")
       for f in ("smart_step", "smart_steps", "smart_noise", "smart_projection", "smart_dropout")},
    "smart_eps": (lambda a, t: a.smart_weight > 0 and a.smart_projection == "ball",
                  "is the radius of --smart_projection ball, used only with --smart_weight above 0"),
    "smart_momentum": (lambda a, t: a.smart_bregman_weight > 0,
                       "is the momentum of SMART's Bregman teacher, which is off without --smart_bregman_weight above 0"),
    "adapter_dim": (lambda a, t: a.fine_tune_mode == "adapter", "sets the width of --fine-tune-mode adapter's adapters"),
    "prefix_length": (lambda a, t: a.fine_tune_mode == "prefix", "sets the length of --fine-tune-mode prefix's prefix"),
    "foreach": (lambda a, t: a.optimizer == "adamw", "switches off AdamW's multi-tensor kernels, which --optimizer "
                                                      "lion and lamb do not have"),
    **{f: (lambda a, t: a.fine_tune_mode != "last-linear-layer",
           "freezes BERT's layers, which --fine-tune-mode last-linear-layer freezes all of already")
       for f in ("freeze_layers", "gradual_unfreeze")},
}
CLASSIFIER_IDLE = {
    "compile": (lambda a, t: a.fine_tune_mode != "last-linear-layer",
                "compiles BERT's forward, which --fine-tune-mode last-linear-layer runs once to cache its features"),
}
MULTITASK_IDLE = {
    "pals_dim": (lambda a, t: a.pals, "is the width of the PALs, which only --pals adds"),
    "gradvac_beta": (lambda a, t: a.gradvac, "is GradVac's moving-average decay, which is off without --gradvac"),
    **{f: (lambda a, t: a.distill is not None, "shapes the distillation loss, which is off without --distill")
       for f in ("distill_weight", "distill_temperature")},
    "mnrl_scale": (lambda a, t: a.mnrl_weight > 0, "scales the MNRL loss, which is off without --mnrl_weight above 0"),
    "sampler": (lambda a, t: not a.sequential, "picks each step's task, which --sequential does not do"),
    "hidden_dropout_prob": (lambda a, t: "task_dropout" not in t,
                            "is every head's dropout, which --task_dropout replaces with one per head"),
}


# Flags whose spelling is not --DEST (store_false switches, the hyphenated handout flag).
SPELLED = {"fine_tune_mode": "--fine-tune-mode", "foreach": "--no_foreach", "bucket": "--no_bucket"}


def flag_spelling(dest):
    return SPELLED.get(dest, f"--{dest}")


def check_idle_flags(args, typed, rules):
    """Refuse, in one line, the first typed flag that `rules` say this configuration ignores."""
    for dest in sorted(typed):
        if dest in rules and not rules[dest][0](args, typed):
            raise MinbertError(f"{flag_spelling(dest)} {rules[dest][1]}: as given it would change nothing, so it is "
                               f"refused rather than ignored (drop it, or add what it needs)")


# ----------------------------------------------------------------------------- groups both pipelines share

def add_speed_flags(ap, training=True):
    """The fast-path switches; each fast path is on by default where it is safe. Inference alone
    (training=False) takes only the ones that act there."""
    g = ap.add_argument_group("speed")
    g.add_argument("--amp", choices=AMP_CHOICES, default="auto",
                   help="mixed precision. auto (default): bf16 where the hardware runs it natively (recent GPUs, "
                        "CPUs with AMX or AVX512-BF16), fp16 with a grad scaler on older GPUs, fp32 otherwise")
    g.add_argument("--attn", choices=["sdpa", "explicit"], default="sdpa", help="attention path")
    g.add_argument("--pad_multiple", type=nonneg_int, default=None, metavar="N",
                   help="pad each batch to a multiple of N tokens, so that a few fixed shapes recur (default: 16 on a "
                        "GPU, 0 = to the batch's longest row on the CPU, where padding costs compute)")
    if not training:
        return g
    g.add_argument("--no_bucket", dest="bucket", action="store_false",
                   help="batch in plain shuffled order (default: length-bucketed batches)")
    g.add_argument("--no_foreach", dest="foreach", action="store_false",
                   help="AdamW's reference per-tensor loop instead of multi-tensor foreach kernels")
    g.add_argument("--compile", action="store_true", help="torch.compile the model")
    g.add_argument("--grad_accum", type=positive_int, default=1, help="accumulate gradients over this many batches")
    return g


def fold_spec(text):
    """--fold I/K: [I, K] with K >= 2 and 1 <= I <= K."""
    try:
        i, k = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not I/K (e.g. 1/3: train without fold 1 of 3)") from None
    if k < 2 or not 1 <= i <= k:
        raise argparse.ArgumentTypeError(f"{text}: I/K needs K >= 2 and 1 <= I <= K")
    return [i, k]


def lora_targets(text):
    names = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in names if t not in TARGETS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"{text!r}: choose a comma-separated list of {','.join(TARGETS)}")
    return names


def add_adapter_flags(ap):
    """The settings of the modes that train new weights on a frozen BERT (finetune.py), the same in both pipelines."""
    g = ap.add_argument_group("adapters (--fine-tune-mode lora, dora, adapter or prefix)")
    g.add_argument("--lora_rank", type=positive_int, default=8, help="r: the adapters' rank, at most the hidden size (the rank B A can have)")
    g.add_argument("--lora_alpha", type=positive_float, default=16.0, help="the update is scaled by alpha / r")
    g.add_argument("--lora_dropout", type=probability, default=0.0, help="dropout on the adapters' input")
    g.add_argument("--lora_targets", type=lora_targets, default=["query", "value"],
                   help="the linears of every layer that get adapters: any of query,key,value,attention_dense,"
                        "interm_dense,out_dense (default query,value)")
    g.add_argument("--adapter_dim", type=positive_int, default=64,
                   help="--fine-tune-mode adapter: the width m of the Houlsby bottleneck adapters (houlsby.py)")
    g.add_argument("--prefix_length", type=positive_int, default=10,
                   help="--fine-tune-mode prefix: the number of trainable keys and values in every layer (prefix.py)")
    g.add_argument("--merge", action="store_true",
                   help="fold LoRA/DoRA adapters into the weights (a prefix: drop its MLP) before the final "
                        "predictions (and in --eval_only), so inference costs what the plain model does")
    return g


# The handout's plain training: a constant learning rate, no warm-up, no clipping, no regulariser.
HANDOUT_RECIPE = {"scheduler": "constant", "warmup_ratio": 0.0, "max_grad_norm": 0.0, "smart_weight": 0.0,
                  "rdrop_weight": 0.0, "smart_bregman_weight": 0.0}


def add_recipe_flags(ap, regularizers, full_model_only=False):
    """The training-recipe levers both pipelines share (schedule.py, trainer.py, smart.py), defaulting to
    the recipe measured best on MiniLM (RESULTS.md), and `--recipe handout`, which puts every default back
    to the handout's plain values."""
    from schedule import SCHEDULES
    g = ap.add_argument_group("training recipe")
    g.add_argument("--recipe", choices=["best", "handout"], default="best",
                   help="defaults: best (the recipe measured best, see RESULTS.md) or handout (its plain values: "
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
    g.add_argument("--weight_decay", type=nonneg_float, default=0.0, help="the optimizer's decoupled weight decay")
    g.add_argument("--optimizer", choices=list(OPTIMIZERS), default="adamw",
                   help="adamw (the handout's), lion (Chen et al. 2023; default lr a third of AdamW's) or lamb "
                        "(You et al. 2020; default lr five times AdamW's): optimizer.py")
    g.add_argument("--freeze_layers", type=nonneg_int, default=0,
                   help="keep the embeddings and the K lowest BERT layers frozen for the whole run (0: none; freezing.py)")
    g.add_argument("--gradual_unfreeze", type=nonneg_int, default=0, metavar="STEPS",
                   help="gradual unfreezing (Howard and Ruder 2018): start with BERT frozen, then unfreeze one more "
                        "layer from the top every STEPS optimizer steps, the embeddings last (0: off; freezing.py)")
    add_regularizer_flags(g, regularizers, full_model_only)
    return g


# The regularisers of the default recipe, per pipeline: the rows measured best in RESULTS.md ("The
# regularisers: which mechanism helps"). Part 1 applies them to full-model only: they need BERT in the graph,
# and last-linear-layer trains on cached features.
DEFAULT_REGULARIZERS = {
    "classifier": {"rdrop_weight": 0.0, "smart_weight": 0.0},
    "multitask": {"rdrop_weight": 2.0, "smart_weight": 0.0},
}
REGULARIZER_WEIGHTS = ("rdrop_weight", "smart_weight")


def _weight_default(weight, full_model_only):
    if full_model_only:
        return f"{weight:g} for full-model, 0 otherwise" if weight else "0"
    return f"{weight:g}"


def add_regularizer_flags(g, defaults, full_model_only=False):
    """R-Drop and SMART (rdrop.py, smart.py): the pipelines' recipe, and bench.py, which times their step.
    `defaults` gives the weights (DEFAULT_REGULARIZERS); with full_model_only they default to None here and
    the parser resolves them once the fine-tune mode is known."""
    def default(name):
        return None if full_model_only else defaults[name]
    g.add_argument("--rdrop_weight", type=nonneg_float, default=default("rdrop_weight"),
                   help="R-Drop (rdrop.py): each batch twice, the task loss averaged over both passes plus this "
                        "weight times their symmetric KL (squared error for STS) (0: off; default "
                        + _weight_default(defaults["rdrop_weight"], full_model_only) + ")")
    g.add_argument("--smart_weight", type=nonneg_float, default=default("smart_weight"),
                   help="SMART's adversarial smoothness term lambda_s (smart.py) (0: off; default "
                        + _weight_default(defaults["smart_weight"], full_model_only) + ")")
    g.add_argument("--smart_step", type=nonneg_float, default=1e-3, help="SMART's ascent step size eta")
    g.add_argument("--smart_steps", type=positive_int, default=1, help="SMART's ascent steps")
    g.add_argument("--smart_noise", type=nonneg_float, default=1e-5, help="sigma of SMART's initial Gaussian perturbation")
    g.add_argument("--smart_projection", choices=["reference", "ball"], default="reference",
                   help="reference: as the authors' code, each token's perturbation scaled to infinity norm ~1 after "
                        "the step; ball: the paper's Algorithm 1, projected onto the --smart_eps ball")
    g.add_argument("--smart_eps", type=nonneg_float, default=1e-5,
                   help="the infinity-norm radius of --smart_projection ball")
    g.add_argument("--smart_dropout", action="store_true",
                   help="keep dropout on in SMART's perturbed passes (default off: the term then measures "
                        "smoothness only, not the difference between two dropout masks)")
    g.add_argument("--smart_bregman_weight", type=nonneg_float, default=0.0,
                   help="mu of SMART's Bregman proximal point step: a symmetric-KL trust region around a momentum "
                        "teacher (0: off; the paper's mu is 1)")
    g.add_argument("--smart_momentum", type=momentum, default=None,
                   help="the teacher's EMA momentum beta (default: the paper's 0.99 for the first 10%% of the "
                        "updates, 0.999 after)")
    return g


def add_run_flags(ap, prefix, checkpoint_alias):
    """Where a run's files go (one spelling in both pipelines: --run_name or --run_dir) and --resume."""
    g = ap.add_argument_group("run folder")
    g.add_argument("--run_name", default="",
                   help=f"the run's folder under runs/ (default: {prefix}-TIMESTAMP); an existing one is refused "
                        f"unless --resume")
    g.add_argument("--run_dir", default=None,
                   help="the run's folder anywhere (instead of runs/RUN_NAME): checkpoints, log and predictions")
    g.add_argument("--resume", action="store_true",
                   help="continue from the last completed epoch (of --run_name / --run_dir, else the newest run)")
    add_tensorboard_flag(g)
    if checkpoint_alias == "--checkpoint_dir":
        g.add_argument("--checkpoint_dir", dest="run_dir", help=argparse.SUPPRESS)  # the earlier spelling
    else:
        g.add_argument("--checkpoint", action=_CheckpointPath, help=argparse.SUPPRESS)  # the earlier spelling
    ap.set_defaults(checkpoint_name=None)
    return g


def add_tensorboard_flag(ap):
    ap.add_argument("--no_tensorboard", dest="tensorboard", action="store_false",
                    help="write no TensorBoard event files into the run folder (default: written, monitor.py)")


class _CheckpointPath(argparse.Action):
    """Part 2's earlier --checkpoint PATH: the run folder is PATH's folder, the best checkpoint PATH itself."""

    def __call__(self, parser, namespace, value, option_string=None):
        from pathlib import Path
        namespace.run_dir, namespace.checkpoint_name = str(Path(value).parent), Path(value).stem


def check_recipe_combination(args):
    """Recipe flags that cannot work together in either pipeline, refused in one line."""
    if args.smart_weight and (args.freeze_layers or args.gradual_unfreeze):
        raise MinbertError("--smart_weight needs the gradient at BERT's embeddings, which frozen layers do not pass "
                           "on (--freeze_layers, --gradual_unfreeze): drop one of them")


def parse_with_recipe(ap, argv, handout_defaults):
    """(parse_args, the flags typed), with the handout's defaults in force when `--recipe handout` is given."""
    given = list(sys.argv[1:] if argv is None else argv)
    if "--recipe=handout" in given or any(a == "--recipe" and b == "handout" for a, b in zip(given, given[1:])):
        ap.set_defaults(**HANDOUT_RECIPE, **handout_defaults)
    return ap.parse_args(given), given_flags(ap, given)


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


def hidden_size(pretrained):
    """The checkpoint's hidden size, from its config.json."""
    from config import BertConfig
    from hub import resolve_pretrained
    return BertConfig.from_json_file(resolve_pretrained(pretrained).require("config").config).hidden_size


# ----------------------------------------------------------------------------- the learning rate's default

# full-model's default learning rate: the best measured on MiniLM (RESULTS.md), and the handout's.
FULL_MODEL_LR = {"best": 1e-4, "handout": 1e-5}
# For checkpoints as wide as bert-base or wider, fine-tuning the whole model: the middle of the range the BERT
# paper gives (Devlin et al. 2019, appendix A.3: 2e-5 to 5e-5); 1e-4 was measured on the 384-wide MiniLM only.
WIDE, WIDE_LR = 768, 3e-5


def resolve_lr(args, hidden_size):
    """Fill in --lr when it was not given, by what trains and how wide the checkpoint is (and by --optimizer:
    optimizer.LR_FACTOR); returns the reason for the start line."""
    if args.lr is not None:
        return f"lr {args.lr:g}"
    why = _default_lr(args, hidden_size)
    factor, reason = LR_FACTOR[getattr(args, "optimizer", "adamw")]
    if factor != 1.0:
        adamw = args.lr
        args.lr = adamw * factor
        why = why.replace(f"lr {adamw:g} (", f"lr {args.lr:g} ({reason}, whose ", 1)
    return why


def _default_lr(args, hidden_size):
    only_new = args.fine_tune_mode in NEW_WEIGHT_MODES or args.fine_tune_mode == "last-linear-layer"
    if only_new:  # adapters, heads on a frozen BERT (with or without PALs): new weights only
        args.lr = ADAPTER_LR
        return f"lr {args.lr:g} (default when only new weights train: adapters, PALs or heads)"
    if hidden_size >= WIDE:
        args.lr = WIDE_LR
        return (f"lr {args.lr:g} (default for a checkpoint of hidden size {hidden_size} >= {WIDE}: the middle of the "
                f"BERT paper's fine-tuning range 2e-5 to 5e-5; 1e-4 was measured best on the 384-wide MiniLM only)")
    args.lr = FULL_MODEL_LR["best"]
    return (f"lr {args.lr:g} (default for a checkpoint of hidden size {hidden_size} < {WIDE}: the best measured on "
            f"the 384-wide MiniLM, see RESULTS.md)")


# ----------------------------------------------------------------------------- Part 1: classifier.py


def classifier_parser():
    ap = Parser(prog="classifier.py", description="Part 1: fine-tune BERT for sentiment on SST and CFIMDB.")
    ap.add_argument("--fine-tune-mode", dest="fine_tune_mode", choices=FINE_TUNE_MODES, default="last-linear-layer",
                    help="what trains: the head on a frozen BERT (the handout's default), the whole model, or "
                         "LoRA / DoRA adapters on a frozen BERT")
    ap.add_argument("--lr", type=positive_float, default=None,
                    help=f"default 1e-3 for last-linear-layer, lora and dora; for full-model {FULL_MODEL_LR['best']:g} "
                         f"below hidden size {WIDE}, {WIDE_LR:g} from {WIDE} up (--recipe handout: "
                         f"{FULL_MODEL_LR['handout']:g})")
    ap.add_argument("--use_gpu", action="store_true", help="train on the GPU (CUDA, or Apple's MPS)")
    ap.add_argument("--batch_size", type=positive_int, default=8, help="examples per optimizer step (all ranks together)")
    ap.add_argument("--hidden_dropout_prob", type=probability, default=0.3, help="dropout before the classifier head")
    ap.add_argument("--epochs", type=positive_int, default=10, help="passes over the training set")
    ap.add_argument("--seed", type=seed, default=11711, help="seeds every random draw: a run is repeatable")
    ap.add_argument("--pretrained", default="bert-base-uncased",
                    help="bert-base-uncased (downloaded once), all-minilm-l6-v2 (packaged), or a local folder")
    ap.add_argument("--data_dir", default="data", help="the folder of the course CSVs")
    ap.add_argument("--datasets", nargs="+", choices=["sst", "cfimdb"], default=["sst", "cfimdb"],
                    help="which datasets to train on, one after the other")
    ap.add_argument("--max_length", type=positive_int, default=512,
                    help="tokens per input, at most the checkpoint's max_position_embeddings")
    add_speed_flags(ap)
    add_adapter_flags(ap)
    add_recipe_flags(ap, DEFAULT_REGULARIZERS["classifier"], full_model_only=True)  # resolved below
    add_run_flags(ap, "classifier", "--checkpoint_dir")
    ap.add_argument("--predictions_dir", default="predictions",
                    help="where the leaderboard files of this run are copied (the run folder keeps its own)")
    return ap


def parse_classifier(argv=None):
    args, typed = parse_with_recipe(classifier_parser(), argv, {})
    twice = sorted({d for d in args.datasets if args.datasets.count(d) > 1})
    if twice:
        raise MinbertError(f"--datasets {' '.join(args.datasets)}: {twice[0]} given twice; each dataset trains once")
    check_idle_flags(args, typed, {**IDLE_FLAGS, **CLASSIFIER_IDLE})
    if args.lr is None and args.fine_tune_mode == "full-model" and args.recipe == "handout":
        args.lr = FULL_MODEL_LR["handout"]
    full = args.fine_tune_mode == "full-model"  # the regularisers need BERT in the graph: by default full-model only
    for name in REGULARIZER_WEIGHTS:
        if getattr(args, name) is None:
            setattr(args, name, DEFAULT_REGULARIZERS["classifier"][name] if full else 0.0)
    if args.smart_weight and args.fine_tune_mode == "last-linear-layer":
        raise MinbertError("--smart_weight perturbs BERT's embeddings, but last-linear-layer trains on cached "
                           "features of a frozen BERT: use --fine-tune-mode full-model")
    check_recipe_combination(args)
    if args.merge:
        check_merge(args.fine_tune_mode)
    return args


# ----------------------------------------------------------------------------- Part 2: multitask_classifier.py

# The handout's flag prefix of each task: --para_train, --para_dev_out, ... are Quora's.
FLAG_PREFIX = TASK_PREFIX
PAIR_ENCODINGS = ("cross", "siamese", "mixed")
# The handout's defaults, for --recipe handout (ours are the recipe measured best on MiniLM, see RESULTS.md).
MULTITASK_HANDOUT = {"fine_tune_mode": "last-linear-layer", "batch_size": 8, "hidden_dropout_prob": 0.3, "lr": 1e-5}
# The flags that shape a multitask model (checkpoint.ModelSpec): --eval_only takes them from the checkpoint.
ARCHITECTURE = ("pretrained", "fine_tune_mode", "lora_rank", "lora_alpha", "lora_targets", "pair_encoding", "pooling",
                "pals", "pals_dim", "siamese_proj", "adapter_dim", "prefix_length", "shared_head")


def multitask_parser():
    ap = Parser(prog="multitask_classifier.py",
                description="Part 2: one BERT for sentiment (SST), paraphrase (Quora) and similarity (STS).")
    for task, prefix in FLAG_PREFIX.items():
        for split in ("train", "dev", "test"):
            ap.add_argument(f"--{prefix}_{split}", default=None, help=f"default: {data_file('DATA_DIR', task, split)}")
    ap.add_argument("--seed", type=seed, default=11711, help="seeds every random draw: a run is repeatable")
    ap.add_argument("--epochs", type=positive_int, default=10, help="epochs of --steps_per_epoch steps")
    ap.add_argument("--fine-tune-mode", dest="fine_tune_mode", choices=FINE_TUNE_MODES, default="full-model",
                    help="full-model, last-linear-layer (frozen BERT), or lora / dora (adapters on a frozen BERT)")
    ap.add_argument("--use_gpu", action="store_true", help="train on the GPU (CUDA, or Apple's MPS)")
    for prefix in FLAG_PREFIX.values():
        for split in ("dev", "test"):
            ap.add_argument(f"--{prefix}_{split}_out", default=f"predictions/{prefix}-{split}-output.csv",
                            help="where this run's file is copied (the run folder keeps its own)")
    ap.add_argument("--batch_size", type=positive_int, default=32, help="examples per step (all ranks together)")
    ap.add_argument("--hidden_dropout_prob", type=probability, default=0.1, help="dropout before every task head")
    ap.add_argument("--lr", type=positive_float, default=None,
                    help=f"default {FULL_MODEL_LR['best']:g} below hidden size {WIDE}, {WIDE_LR:g} from {WIDE} up; 1e-3 "
                         f"when only adapters (lora, dora) or PALs and heads train")
    ap.add_argument("--pretrained", default="bert-base-uncased",
                    help="bert-base-uncased (downloaded once), all-minilm-l6-v2 (packaged), a hub id, or a local folder")
    ap.add_argument("--data_dir", default="data", help="the folder of the course CSVs (each --*_train/dev/test overrides one)")
    ap.add_argument("--max_length", type=positive_int, default=128,
                    help="tokens per input, at most the checkpoint's max_position_embeddings")
    add_speed_flags(ap)
    add_adapter_flags(ap)
    ap.add_argument("--pals", action="store_true",
                    help="projected attention layers per task beside every BERT layer (Stickland & Murray 2019); "
                         "the backbone trains with full-model and stays frozen with last-linear-layer")
    ap.add_argument("--pals_dim", type=positive_int, default=None,
                    help="the PALs' width d_s (default: 204 scaled from BERT-base to the checkpoint's hidden size)")
    add_recipe_flags(ap, DEFAULT_REGULARIZERS["multitask"])
    ap.add_argument("--pair_encoding", choices=PAIR_ENCODINGS, default="cross",
                    help="cross: '[CLS] a [SEP] b [SEP]'; siamese: two sentence embeddings; mixed: Quora cross, STS siamese")
    ap.add_argument("--pooling", choices=["cls", "pooler", "mean"], default="mean",
                    help="the sentence embedding: masked mean of the last layer, its [CLS] state, or the pooler output")
    g = ap.add_argument_group("sentence embeddings (losses.py; MNRL, SimCSE and the projection need siamese pairs: "
                              "--pair_encoding siamese or mixed)")
    g.add_argument("--sts_loss", choices=["mse", "cosine", "cosent"], default="mse",
                   help="STS objective: MSE on 0-5, cosine regression to score/5, or CoSENT's ranking loss")
    g.add_argument("--mnrl_weight", type=nonneg_float, default=0.0,
                   help="multiple negatives ranking loss on Quora duplicates and STS pairs with gold >= 4 (0: off)")
    g.add_argument("--mnrl_scale", type=positive_float, default=20.0, help="MNRL's scale on the cosine")
    g.add_argument("--simcse_weight", type=nonneg_float, default=0.0,
                   help="unsupervised SimCSE on each batch's sentences, temperature 0.05 (0: off)")
    g.add_argument("--siamese_proj", type=nonneg_int, default=0,
                   help="a shared linear projection to this many dimensions before cosine and pair features (0: off)")
    ap.add_argument("--sequential", action="store_true", help="train the tasks one after another each epoch")
    ap.add_argument("--sampler", choices=["annealed", "proportional", "round-robin", "all"], default="annealed",
                    help="all: one batch of every task in each optimizer step (losses summed, or PCGrad)")
    ap.add_argument("--pcgrad", action="store_true",
                    help="gradient surgery (Yu et al. 2020) on the per-task gradients; needs --sampler all")
    ap.add_argument("--gradvac", action="store_true",
                    help="Gradient Vaccine (Wang et al. 2021; gradvac.py): align each pair of task gradients with the "
                         "similarity they usually have; needs --sampler all")
    ap.add_argument("--gradvac_beta", type=probability, default=1e-2,
                    help="the decay of GradVac's moving average of each pair's gradient similarity (the paper's 1e-2)")
    ap.add_argument("--shared_head", type=nonneg_int, default=0, metavar="DIM",
                    help="one hidden layer (DIM units, GELU) shared by the task heads of SST and cross-encoded pairs, "
                         "each task keeping its own output layer (0: separate heads)")
    ap.add_argument("--extra_task", nargs="+", default=[], metavar="NAME=FILE",
                    help="more training data with heads of their own, trained through the same sampler: snli, mnli "
                         "(.jsonl or .txt as released), sick (SICK.txt), paws (train.tsv); extra_tasks.py")
    ap.add_argument("--distill", metavar="SOFT_TARGETS", default=None,
                    help="train on an ensemble's predictions too (Hinton et al. 2015): the soft-targets.npz that "
                         "ensemble.py --soft_targets writes (distill.py)")
    ap.add_argument("--fold", type=fold_spec, default=None, metavar="I/K",
                    help="train without fold I of K of every training set (folds by a hash of the example id): the "
                         "teachers of cross-fitted soft targets, one run per fold (distill.py)")
    ap.add_argument("--distill_weight", type=fraction, default=0.5,
                    help="alpha: the loss is (1 - alpha) gold + alpha distillation")
    ap.add_argument("--distill_temperature", type=positive_float, default=2.0,
                    help="T: teacher and student probabilities are softened by T (the term is scaled by T^2)")
    ap.add_argument("--steps_per_epoch", type=positive_int, default=None,
                    help="joint training steps per epoch (default: one pass's worth of batches over all tasks)")
    ap.add_argument("--loss_weights", type=nonneg_float, nargs=3, default=[1.0, 1.0, 1.0],
                    metavar=("SST", "QUORA", "STS"), help="each task's weight in the training loss")
    ap.add_argument("--task_dropout", type=probability, nargs=3, default=None, metavar=("SST", "QUORA", "STS"),
                    help="per-head dropout (default: --hidden_dropout_prob for all three)")
    add_run_flags(ap, "multitask", "--checkpoint")
    ap.add_argument("--eval_only", metavar="CHECKPOINT", help="re-score a saved model and rewrite the six files")
    ap.add_argument("--results", default="predictions/multitask-results.csv", help="every run appends a row here")
    return ap


# What --eval_only reads of the flags: the model comes from its checkpoint (architecture flags typed must agree
# with it), so every training flag is ignored, and a line says which.
EVAL_ONLY_FLAGS = {"eval_only", "merge", "amp", "attn", "use_gpu", "max_length", "data_dir", "run_dir",
                   *ARCHITECTURE} | {f"{p}_{s}" for p in FLAG_PREFIX.values() for s in ("dev", "test", "dev_out", "test_out")}


def parse_multitask(argv=None):
    args, typed = parse_with_recipe(multitask_parser(), argv, MULTITASK_HANDOUT)
    if args.eval_only:
        ignored = sorted(typed - EVAL_ONLY_FLAGS - {"checkpoint_name"})  # --checkpoint sets run_dir and that
        if ignored:
            from utils import main_print
            main_print(f"--eval_only re-scores the saved model, so the training flags "
                       f"{', '.join(map(flag_spelling, ignored))} change nothing")
    else:
        check_idle_flags(args, typed, {**IDLE_FLAGS, **MULTITASK_IDLE})
    if args.task_dropout is None:
        args.task_dropout = [args.hidden_dropout_prob] * 3
    if not args.eval_only:
        check_multitask_combination(args)
    if args.sampler == "all" and distributed()[1] > 1:
        raise MinbertError("--sampler all (and --pcgrad, --gradvac) run in one process only; drop torchrun or pick "
                           "another sampler")
    for task, prefix in FLAG_PREFIX.items():
        for split in ("train", "dev", "test"):
            if getattr(args, f"{prefix}_{split}") is None:
                setattr(args, f"{prefix}_{split}", str(data_file(args.data_dir, task, split)))
    return args


def check_multitask_combination(args):
    """Flags that cannot work together, each refused in one line naming the fix."""
    if args.pair_encoding == "cross":
        needs = [f for f in ("mnrl_weight", "simcse_weight", "siamese_proj") if getattr(args, f)]
        if needs:
            raise MinbertError(f"--{needs[0]} works on sentence embeddings, which cross-encoded pairs do not have: "
                               f"add --pair_encoding siamese (or mixed)")
    if args.merge:
        check_merge(args.fine_tune_mode)
    for surgery in ("pcgrad", "gradvac"):
        if getattr(args, surgery) and args.sampler != "all":
            raise MinbertError(f"--{surgery} needs the gradients of every task in one step: add --sampler all")
        if getattr(args, surgery) and args.sequential:
            raise MinbertError(f"--{surgery} cannot be combined with --sequential (one task at a time)")
    if args.pcgrad and args.gradvac:
        raise MinbertError("--pcgrad and --gradvac are two ways to combine the task gradients: choose one")
    names = [e.partition("=")[0] for e in args.extra_task]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise MinbertError(f"--extra_task: {twice[0]} given twice; each data set has one head (concatenate the files)")
    for item in args.extra_task:
        from extra_tasks import parse_extra
        parse_extra(item)
    if args.shared_head and args.pair_encoding == "siamese":
        raise MinbertError("--shared_head shares a hidden layer between the heads of SST and cross-encoded pairs; with "
                           "--pair_encoding siamese only SST has such a head: use cross or mixed")
    check_recipe_combination(args)
    if not any(args.loss_weights):
        raise MinbertError("--loss_weights 0 0 0: every task's loss is switched off, so nothing would train; "
                           "give at least one task a weight above 0")


# ----------------------------------------------------------------------------- pretrain.py

def pretrain_parser():
    ap = Parser(prog="pretrain.py", description="Further masked-LM pretraining on the task text.")
    ap.add_argument("--pretrained", default="bert-base-uncased", help="the checkpoint to pretrain further")
    ap.add_argument("--data_dir", default="data", help="the course CSVs whose training sentences are the text")
    ap.add_argument("--texts", default=None, help="one sentence per line, instead of the task training text")
    ap.add_argument("--out", required=True, help="the checkpoint folder to write (loadable with --pretrained OUT)")
    ap.add_argument("--epochs", type=positive_int, default=3, help="passes over the text")
    ap.add_argument("--max_steps", type=nonneg_int, default=0, help="stop after this many optimizer steps (0: no limit)")
    ap.add_argument("--lr", type=positive_float, default=5e-5, help="peak learning rate (linear warm-up, then decay)")
    ap.add_argument("--batch_size", type=positive_int, default=32, help="sentences per step")
    ap.add_argument("--max_length", type=positive_int, default=128, help="tokens per sentence")
    ap.add_argument("--mask_prob", type=fraction, default=0.15, help="share of tokens chosen for prediction")
    ap.add_argument("--weight_decay", type=nonneg_float, default=0.01, help="AdamW's decoupled weight decay")
    ap.add_argument("--warmup_ratio", type=fraction, default=0.06, help="share of the steps spent warming up")
    ap.add_argument("--seed", type=seed, default=11711, help="seeds every random draw: a run is repeatable")
    ap.add_argument("--use_gpu", action="store_true", help="train on the GPU (CUDA, or Apple's MPS)")
    ap.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    add_tensorboard_flag(ap)
    add_speed_flags(ap)
    # the shared trainer's other levers, at their plain values (not flags of this script)
    ap.set_defaults(scheduler="linear", max_grad_norm=1.0, llrd=1.0, head_lr=None, patience=0, optimizer="adamw",
                    freeze_layers=0, gradual_unfreeze=0)
    return ap


def parse_pretrain(argv=None):
    return pretrain_parser().parse_args(argv)
