"""Flags that cannot do what they say in a configuration, refused in one line before anything trains: a flag
typed where it would change nothing (a flag silently ignored makes a run the user did not mean to make: each
flag's rule is in its row, minbert/flags/table.py), and flags that cannot work together. Every rule reads the
parsed flags as a dict, {destination: value}, and `typed`, the destinations given on the command line (not
left at their defaults)."""
from minbert.cli import MinbertError
from minbert.finetuning.modes import ADAPTER_MODES, check_merge
from minbert.objectives.regularizers import REGULARIZERS
from minbert.tasks.extra import parse_extra


# ----------------------------------------------------------------------------- the rules rows name
# (acts(values, typed), what the flag does): a flag typed where `acts` is false would change nothing, and is
# refused in one line (check_idle_flags). Rows (table.py) name them; these are the ones several rows share.

def not_frozen_head(what):
    return lambda flags, typed: flags["fine_tune_mode"] != "last-linear-layer", what


RECORD_STEP = (lambda flags, typed: flags["use_gpu"],
               "runs the eager step instead of the recorded one, which only --use_gpu records")
ADAPTERS_ONLY = (lambda flags, typed: flags["fine_tune_mode"] in ADAPTER_MODES,
                 "sets the adapters, which only --fine-tune-mode lora or dora adds")
FOREACH = (lambda flags, typed: flags["optimizer"] == "adamw", "switches off AdamW's multi-tensor kernels, which "
                                                   "--optimizer lion and lamb do not have")
FUSED = (lambda flags, typed: flags["optimizer"] == "adamw" and flags["foreach"],
         "switches off AdamW's fused pass, which --optimizer lion and lamb, and --no_foreach, do not use")
FREEZING = not_frozen_head("freezes BERT's layers, which --fine-tune-mode last-linear-layer freezes all of "
                            "already")
NO_HEAD = ("is the learning rate of task heads, and every weight here is GPT-2's (its LM head is the token "
           "embeddings)")
SAMPLING = (lambda flags, typed: flags["decoding"] == "sample",
            "shapes the sampling of --decoding sample, which --decoding greedy and beam do not draw")
BEAM = (lambda flags, typed: flags["decoding"] == "beam", "shapes beam search, which only --decoding beam runs")
DISTILL = (lambda flags, typed: flags["distill"] is not None,
           "shapes the distillation loss, which is off without --distill")


def shaping_rule(regularizer, flag):
    """The rule of a flag shaping a regulariser's term (objectives/regularizers.py): it acts only when the
    term's weight is above 0, and flag.when holds."""
    weight, what = regularizer.weight, flag.what or f"shapes {regularizer.label}"
    if flag.when is None:
        return lambda flags, typed: flags[weight] > 0, f"{what}, which is off without --{weight} above 0"
    words, holds = flag.when
    return (lambda flags, typed: flags[weight] > 0 and holds(flags),
            f"{what}, used only with --{weight} above 0 and {words}")


def check_recipe_combination(flags):
    """Recipe flags that cannot work together in either pipeline, refused in one line."""
    for r in REGULARIZERS.values():
        if r.embedding_gradient and flags[r.weight] and (flags["freeze_layers"] or flags["gradual_unfreeze"]):
            raise MinbertError(f"--{r.weight} needs the gradient at BERT's embeddings, which frozen layers "
                               "do not pass on (--freeze_layers, --gradual_unfreeze): drop one of them")


def check_classifier_combination(flags):
    """Part 1's flags that cannot work together (after its regularisers' defaults are resolved)."""
    for r in REGULARIZERS.values():
        if r.embedding_gradient and flags[r.weight] and flags["fine_tune_mode"] == "last-linear-layer":
            raise MinbertError(f"--{r.weight} needs the gradient at BERT's embeddings, but last-linear-layer "
                               "trains on cached features of a frozen BERT: use --fine-tune-mode full-model")
    check_recipe_combination(flags)
    if flags["merge"]:
        check_merge(flags["fine_tune_mode"])


def check_multitask_combination(flags):
    """Part 2's flags that cannot work together, each refused in one line naming the fix."""
    if flags["pair_encoding"] == "cross":
        needs = [f for f in ("mnrl_weight", "simcse_weight", "siamese_proj") if flags[f]]
        if needs:
            raise MinbertError(f"--{needs[0]} works on sentence embeddings, which cross-encoded pairs do not "
                               "have: add --pair_encoding siamese (or mixed)")
    if flags["merge"]:
        check_merge(flags["fine_tune_mode"])
    for surgery in ("pcgrad", "gradvac"):
        if flags[surgery] and flags["sampler"] != "all":
            raise MinbertError(f"--{surgery} needs the gradients of "
                               "every task in one step: add --sampler all")
        if flags[surgery] and flags["sequential"]:
            raise MinbertError(f"--{surgery} cannot be combined with --sequential (one task at a time)")
    if flags["pcgrad"] and flags["gradvac"]:
        raise MinbertError("--pcgrad and --gradvac are two ways to combine the task gradients: choose one")
    names = [e.partition("=")[0] for e in flags["extra_task"]]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise MinbertError(f"--extra_task: {twice[0]} given twice; each "
                           "data set has one head (concatenate the files)")
    for item in flags["extra_task"]:
        parse_extra(item)
    if flags["shared_head"] and flags["pair_encoding"] == "siamese":
        raise MinbertError("--shared_head shares a hidden layer between the heads of SST and cross-encoded "
                           "pairs; with --pair_encoding siamese only SST has such a head: use cross or mixed")
    check_recipe_combination(flags)
    if not any(flags["loss_weights"]):
        raise MinbertError("--loss_weights 0 0 0: every task's loss is switched off, so nothing would train; "
                           "give at least one task a weight above 0")
