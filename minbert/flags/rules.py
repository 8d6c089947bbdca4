"""Flags that cannot do what they say in a configuration, refused in one line before anything trains: a flag
typed where it would change nothing (a flag silently ignored makes a run the user did not mean to make), and
flags that cannot work together. Every rule reads the parsed flags as a dict, {destination: value}, and
`typed`, the destinations given on the command line (not left at their defaults)."""
from minbert.finetuning.modes import ADAPTER_MODES, check_merge
from minbert.objectives.regularizers import REGULARIZERS
from minbert.runs.identity import flag_spelling
from minbert.tasks.extra import parse_extra
from utils import MinbertError

def _shaping_rule(regularizer, flag):
    """The rule of a flag shaping a regulariser's term (objectives/regularizers.py): it acts only when the
    term's weight is above 0, and flag.when holds."""
    weight, what = regularizer.weight, flag.what or f"shapes {regularizer.label}"
    if flag.when is None:
        return lambda v, t: v[weight] > 0, f"{what}, which is off without --{weight} above 0"
    words, holds = flag.when
    return lambda v, t: v[weight] > 0 and holds(v), f"{what}, used only with --{weight} above 0 and {words}"


# Flags that act only in some configurations: {flag: (acts(values, typed), what it does and when)}.
RECORD_STEP_IDLE = (lambda v, t: v["use_gpu"],
                    "runs the eager step instead of the recorded one, which only --use_gpu records")
IDLE_FLAGS = {
    **{f: (lambda v, t: v["fine_tune_mode"] in ADAPTER_MODES,
           "sets the adapters, which only --fine-tune-mode lora or dora adds")
       for f in ("lora_rank", "lora_alpha", "lora_dropout", "lora_targets")},
    "llrd": (lambda v, t: v["fine_tune_mode"] != "last-linear-layer",
             "scales the learning rates of BERT's layers, which --fine-tune-mode last-linear-layer freezes"),
    # every flag shaping a regulariser acts only when its weight is above 0 (and, for some, another flag's
    # value: specs.Flag's `when`)
    **{f.dest: _shaping_rule(r, f) for r in REGULARIZERS.values() for f in r.flags[1:]},
    "adapter_dim": (lambda v, t: v["fine_tune_mode"] == "adapter", "sets the width of "
                                                                   "--fine-tune-mode adapter's adapters"),
    "prefix_length": (lambda v, t: v["fine_tune_mode"] == "prefix", "sets the length of "
                                                                    "--fine-tune-mode prefix's prefix"),
    "foreach": (lambda v, t: v["optimizer"] == "adamw", "switches off AdamW's multi-tensor kernels, which "
                                                        "--optimizer lion and lamb do not have"),
    "fused": (lambda v, t: v["optimizer"] == "adamw" and v["foreach"],
              "switches off AdamW's fused pass, which --optimizer "
              "lion and lamb, and --no_foreach, do not use"),
    **{f: (lambda v, t: v["fine_tune_mode"] != "last-linear-layer",
           "freezes BERT's layers, which --fine-tune-mode last-linear-layer freezes all of already")
       for f in ("freeze_layers", "gradual_unfreeze")},
    "record_step": RECORD_STEP_IDLE,
}
CLASSIFIER_IDLE = {
    "compile": (lambda v, t: v["fine_tune_mode"] != "last-linear-layer",
                "compiles BERT's forward, which --fine-tune-mode "
                "last-linear-layer runs once to cache its features"),
}
MULTITASK_IDLE = {
    "pals_dim": (lambda v, t: v["pals"], "is the width of the PALs, which only --pals adds"),
    "gradvac_beta": (lambda v, t: v["gradvac"], "is GradVac's moving-average decay, "
                                                "which is off without --gradvac"),
    **{f: (lambda v, t: v["distill"] is not None, "shapes the distillation loss, "
                                                  "which is off without --distill")
       for f in ("distill_weight", "distill_temperature")},
    "mnrl_scale": (lambda v, t: v["mnrl_weight"] > 0, "scales the MNRL loss, which is "
                                                      "off without --mnrl_weight above 0"),
    "sampler": (lambda v, t: not v["sequential"], "picks each step's task, which --sequential does not do"),
    "hidden_dropout_prob": (lambda v, t: "task_dropout" not in t,
                            "is every head's dropout, which --task_dropout replaces with one per head"),
}

PRETRAIN_IDLE = {
    "record_step": RECORD_STEP_IDLE,
    "data_dir": (lambda v, t: v["texts"] is None,
                 "is where the course CSVs' training sentences are read, which --texts replaces as the text"),
    "corpus": (lambda v, t: v["texts"] is None, "picks the text, which --texts replaces"),
}

BENCH_IDLE = {
    "record_step": RECORD_STEP_IDLE,
    "config": (lambda v, t: v["pretrained"] is None,
               "is the shape of the random model, which --pretrained replaces with the checkpoint's"),
    "data_dir": (lambda v, t: v["data"] != "synthetic",
                 "is the folder of the course CSVs, which --data synthetic does not read (random token ids)"),
}


def check_idle_flags(values, typed, rules):
    """Refuse, in one line, the first typed flag that `rules` say this configuration ignores."""
    for dest in sorted(typed):
        if dest in rules and not rules[dest][0](values, typed):
            raise MinbertError(f"{flag_spelling(dest)} {rules[dest][1]}: as given it would change nothing, "
                               "so it is refused rather than ignored (drop it, or add what it needs)")


def check_recipe_combination(v):
    """Recipe flags that cannot work together in either pipeline, refused in one line."""
    for r in REGULARIZERS.values():
        if r.embedding_gradient and v[r.weight] and (v["freeze_layers"] or v["gradual_unfreeze"]):
            raise MinbertError(f"--{r.weight} needs the gradient at BERT's embeddings, which frozen layers "
                               "do not pass on (--freeze_layers, --gradual_unfreeze): drop one of them")


def check_classifier_combination(v):
    """Part 1's flags that cannot work together (after its regularisers' defaults are resolved)."""
    twice = sorted({d for d in v["datasets"] if v["datasets"].count(d) > 1})
    if twice:
        raise MinbertError(f"--datasets {' '.join(v['datasets'])}: "
                           f"{twice[0]} given twice; each dataset trains once")
    for r in REGULARIZERS.values():
        if r.embedding_gradient and v[r.weight] and v["fine_tune_mode"] == "last-linear-layer":
            raise MinbertError(f"--{r.weight} needs the gradient at BERT's embeddings, but last-linear-layer "
                               "trains on cached features of a frozen BERT: use --fine-tune-mode full-model")
    check_recipe_combination(v)
    if v["merge"]:
        check_merge(v["fine_tune_mode"])


def check_multitask_combination(v):
    """Part 2's flags that cannot work together, each refused in one line naming the fix."""
    if v["pair_encoding"] == "cross":
        needs = [f for f in ("mnrl_weight", "simcse_weight", "siamese_proj") if v[f]]
        if needs:
            raise MinbertError(f"--{needs[0]} works on sentence embeddings, which cross-encoded pairs do not "
                               "have: add --pair_encoding siamese (or mixed)")
    if v["merge"]:
        check_merge(v["fine_tune_mode"])
    for surgery in ("pcgrad", "gradvac"):
        if v[surgery] and v["sampler"] != "all":
            raise MinbertError(f"--{surgery} needs the gradients of "
                               "every task in one step: add --sampler all")
        if v[surgery] and v["sequential"]:
            raise MinbertError(f"--{surgery} cannot be combined with --sequential (one task at a time)")
    if v["pcgrad"] and v["gradvac"]:
        raise MinbertError("--pcgrad and --gradvac are two ways to combine the task gradients: choose one")
    names = [e.partition("=")[0] for e in v["extra_task"]]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise MinbertError(f"--extra_task: {twice[0]} given twice; each "
                           "data set has one head (concatenate the files)")
    for item in v["extra_task"]:
        parse_extra(item)
    if v["shared_head"] and v["pair_encoding"] == "siamese":
        raise MinbertError("--shared_head shares a hidden layer between the heads of SST and cross-encoded "
                           "pairs; with --pair_encoding siamese only SST has such a head: use cross or mixed")
    check_recipe_combination(v)
    if not any(v["loss_weights"]):
        raise MinbertError("--loss_weights 0 0 0: every task's loss is switched off, so nothing would train; "
                           "give at least one task a weight above 0")
