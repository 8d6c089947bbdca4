"""The flags of the training recipe: --recipe, the schedule, clipping, the optimizer and its rates, weight
decay, label smoothing, freezing, and every regulariser's flags (objectives/regularizers.py); one row each
(flag.Flag), listed with the others in flags/table.py. A default that is a decision (pretrain.py's recipe, each
pipeline's regularisers, what --recipe handout puts back) is read from flags/defaults.py's table, its source in
the help; one that is Recipe's own is read from there (flag.default)."""
from dataclasses import fields

from minbert.cli import flag_spelling
from minbert.flag import BENCH, BERT, G1, GP, P1, PRE, TRAINING, Flag, Per, default
from minbert.flags.defaults import factors_said, handout_rows, rule, ruled, shown, source_words, sourced
from minbert.flags.rules import FREEZING, NO_HEAD, not_frozen_head, shaping_rule
from minbert.objectives.regularizers import REGULARIZERS
from minbert.specs import Recipe
from minbert.training.schedule import SCHEDULES
from optimizer import OPTIMIZERS

RECIPE = "training recipe"
BENCH_REGULARIZERS = "regularisers, as the pipelines take them (default: Part 2's default recipe)"


def rows():
    """The training recipe's rows, the regularisers' last, in --help's order."""
    F = Flag
    return [
        F("recipe", "best", ("best", "handout"), Per(**{s: _recipe_help(s) for s in TRAINING}), scripts=TRAINING,
          group=RECIPE),
        F("scheduler", default(Recipe, "scheduler"), SCHEDULES,
          "learning rate after warm-up: constant (the handout), linear or cosine decay to 0", scripts=TRAINING,
          group=RECIPE, implied={PRE}),
        F("warmup_ratio", ruled("warmup_ratio", default(Recipe, "warmup_ratio")), "fraction",
          sourced("warmup_ratio", Per("share of all optimizer steps spent warming up",
                                      pretrain="share of the steps spent warming up")),
          scripts=TRAINING | {PRE}, group=Per(RECIPE, pretrain=None)),
        F("max_grad_norm", ruled("max_grad_norm", default(Recipe, "max_grad_norm")), "nonneg_float",
          "clip the global gradient norm (0: off)", scripts=TRAINING, group=RECIPE, implied={PRE}),
        F("patience", default(Recipe, "patience"), "nonneg_int",
          "stop after this many epochs without a better dev score (0: never)", scripts=TRAINING, group=RECIPE,
          implied={PRE}),
        F("llrd", default(Recipe, "llrd"), "llrd_factor",
          "layer-wise lr decay: layer l of L trains at lr * GAMMA^(L-1-l), embeddings at GAMMA^L", scripts=BERT,
          group=RECIPE, not_gpt2="(layer-wise rates as measured for BERT)",
          idle=not_frozen_head("scales the learning rates of BERT's layers, which --fine-tune-mode "
                                "last-linear-layer freezes"), implied={PRE}),
        F("head_lr", default(Recipe, "head_lr"), "positive_float", "task heads' learning rate (default --lr)",
          scripts=TRAINING, group=RECIPE, idle=Per(None, gpt2_paraphrase=(lambda flags, typed: False, NO_HEAD),
                                                   gpt2_sonnet=(lambda flags, typed: False, NO_HEAD)), implied={PRE}),
        F("weight_decay", ruled("weight_decay", default(Recipe, "weight_decay")), "nonneg_float",
          sourced("weight_decay", Per("the optimizer's decoupled weight decay",
                                      pretrain="AdamW's decoupled weight decay")),
          scripts=TRAINING | {PRE}, group=Per(RECIPE, pretrain=None)),
        F("label_smoothing", default(Recipe, "label_smoothing"), "probability",
          "epsilon of label smoothing (Szegedy et al. 2016): each classification loss's target puts 1 - epsilon on "
          "the gold class and epsilon spread evenly over all K classes (0: the one-hot labels; "
          "minbert/objectives/rows.py)", scripts=BERT | {G1, GP}, group=RECIPE),
        F("optimizer", default(Recipe, "optimizer"), tuple(OPTIMIZERS),
          Per(**{s: "adamw (the handout's), lion (Chen et al. 2023) or lamb (You et al. 2020): optimizer.py; "
                    f"the default --lr: {'; '.join(factors_said(s))}" for s in TRAINING}),
          scripts=TRAINING, group=RECIPE, implied={PRE}),
        F("freeze_layers", default(Recipe, "freeze_layers"), "nonneg_int",
          "keep the embeddings and the K lowest BERT layers frozen for the whole run (0: none; "
          "minbert/finetuning/freezing.py)", scripts=BERT, group=RECIPE,
          not_gpt2="(freezing runs BERT's lower layers without a graph)", idle=FREEZING, implied={PRE}),
        F("gradual_unfreeze", default(Recipe, "gradual_unfreeze"), "nonneg_int",
          "gradual unfreezing (Howard and Ruder 2018): start with BERT frozen, then unfreeze one more layer from "
          "the top every STEPS optimizer steps, the embeddings last (0: off; minbert/finetuning/freezing.py)",
          metavar="STEPS", scripts=BERT, group=RECIPE,
          not_gpt2="(freezing runs BERT's lower layers without a graph)", idle=FREEZING, implied={PRE}),
        *_regularizer_rows(),
    ]


def _recipe_help(script):
    """--recipe's help in `script`: what --recipe handout puts back there, from flags/defaults.py's rows."""
    plain = ", ".join(f"{flag_spelling(r.setting)} {shown(r, r.value)}" for r in handout_rows(script))
    return (f"defaults: best (what each flag's help says) or handout (the handout's: {plain}); flags given "
            "explicitly win either way")


def _weight_help(f, script):
    """A regulariser weight's help in `script`: its default, and where a row of flags/defaults.py sets it, the
    row's source (Part 1's for full-model only: its regularisers need BERT in the graph)."""
    found = rule(f.dest, script, mode="full-model" if script == P1 else None)
    if found is None:
        return f"{f.help} (0: off; default {f.default:g})"
    said = f"{shown(found, found.value)}: {source_words(found)}"
    if script == P1:
        said = f"{said}, for full-model; else 0" if found.value else f"0 (for full-model, {source_words(found)})"
    return f"{f.help} (0: off; default {said})"


def _regularizer_rows():
    """Every regulariser's flags (objectives/regularizers.py REGULARIZERS: one row each, the weight first), in
    the training scripts and bench.py; Build GPT-2's take those whose row has no `gpt2` reason."""
    rows = []
    for r in REGULARIZERS.values():
        scripts = (TRAINING if not r.gpt2 else BERT) | {BENCH}
        for f in r.flags:
            weight = f is r.flags[0]
            if weight:
                help_ = Per(**{s: _weight_help(f, s) for s in scripts})
                # Part 1's weights are resolved once the fine-tune mode is known (settings.py): None until then
                row = Flag(f.dest, ruled(f.dest, Per(f.default, classifier=None)), f.kind, help_)
            else:
                row = Flag(f.dest, f.default, f.kind, f.help, idle=shaping_rule(r, f))
            rows.append(Flag(**{**{k.name: getattr(row, k.name) for k in fields(Flag)}, "what": f.what,
                                "when": f.when, "scripts": frozenset(scripts),
                                "group": Per(RECIPE, bench=BENCH_REGULARIZERS),
                                "not_gpt2": (f"({r.gpt2})" if weight else
                                             f"{f.what or 'shapes ' + r.label}, which GPT-2 does not have "
                                             f"({r.gpt2})") if r.gpt2 else None}))
    return rows
