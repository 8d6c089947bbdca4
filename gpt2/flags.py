"""The GPT-2 scripts' flags, built from the shared groups (minbert/flags/groups.py), and the settings they
become: the same frozen objects (minbert/specs.py) the BERT pipelines take.

Part 1's flags are the handout's (--fine-tune-mode, --batch_size, --lr, --hidden_dropout_prob, --epochs,
--use_gpu, --seed) with the shared speed, recipe and run-folder groups; `--recipe handout` puts the shared
recipe's defaults back to the handout's plain training (constant lr, no warm-up or clipping), as in minBERT.
The levers that reach into BERT's own modules (SMART's embedding perturbation and every flag shaping it,
--freeze_layers, --gradual_unfreeze, --llrd, --no_fast_dropout) are left out of the shared groups here
(bert=False), and typed they are one line saying why (groups.BERT_ONLY); so is a flag typed where it would
change nothing (minbert/flags/rules.py)."""
from gpt2.config import ConfigError, GPT2Config
from gpt2.sonnets import SonnetSettings
from minbert.flags.defaults import resolve_lr
from minbert.flags.groups import (BERT_ONLY, add_adapter_flags, add_recipe_flags, add_run_flags,
                                  add_speed_flags)
from minbert.flags.rules import IDLE_FLAGS, check_idle_flags
from minbert.flags.settings import from_flags, parse_flags, recipe, regularizers, run_spec, runtime
from minbert.flags.types import (early_stopping, finite_float, nonneg_int, positive_float, positive_int, probability,
                                 seed, share)
from minbert.hub import resolve_pretrained
from minbert.objectives.regularizers import REGULARIZERS, regularizer_weights
from minbert.specs import MAX_LENGTH, ClassifierSettings, ModelSpec
from utils import MinbertError, Parser

# The whole model's default AdamW rate, the GPT-2 handout's; the rest of the rule is minBERT's (new weights alone:
# 1e-3; Lion a third, LAMB five times: minbert/flags/defaults.py resolve_lr).
FULL_MODEL_LR = (1e-5, f"lr {1e-5:g} (the GPT-2 handout's for the whole model)")
ADAPTER_DEFAULTS = {"lora_rank": 8, "lora_alpha": 16.0, "lora_dropout": 0.0, "lora_targets": ["query",
                                                                                              "value"]}
# Flags that act only in some configurations (minbert/flags/rules.py's rules; the adapters' flags have
# GPT-2's own checks in classifier_settings). BERT's own levers are not declared here at all
# (groups.BERT_ONLY says why).
GPT2_IDLE = {f: IDLE_FLAGS[f] for f in ("foreach", "fused", "record_step")}
CLASSIFIER_IDLE = {
    "compile": (lambda v, t: v["fine_tune_mode"] != "last-linear-layer",
                "compiles GPT-2's forward, which --fine-tune-mode "
                "last-linear-layer runs once to cache its features"),
}
NO_HEAD = ("is the learning rate of task heads, and every weight here is GPT-2's (its LM head is the token "
           "embeddings)")
PARAPHRASE_IDLE = {
    "predictions_dir": (lambda v, t: v["para_dev_out"] is None or v["para_test_out"] is None,
                        "is where the two files go that --para_dev_out "
                        "and --para_test_out both name already"),
    "hidden_dropout_prob": (lambda v, t: False, "is the dropout before a classifier head, which the cloze "
                                                "task does not have (it answers with the LM head)"),
    "head_lr": (lambda v, t: False, NO_HEAD),
}
SONNET_IDLE = {
    "head_lr": (lambda v, t: False, NO_HEAD),
    **{f: (lambda v, t: v["decoding"] == "sample", "shapes the sampling of --decoding sample, "
                                                   "which --decoding greedy and beam do not draw")
       for f in ("temperature", "top_p")},
    **{f: (lambda v, t: v["decoding"] == "beam", "shapes beam search, which only --decoding beam runs")
       for f in ("num_beams", "length_penalty", "no_repeat_ngram_size", "early_stopping")},
}


MODE_WORDS = {"last-linear-layer": "last-linear-layer (the head on a frozen GPT-2)",
              "full-model": "full-model (the whole model)", "lora": "lora",
              "dora": "dora (low-rank adapters)", "adapter": "adapter (Houlsby bottleneck adapters)"}


def _parser(prog, kind, description, modes):
    """The flags both GPT-2 scripts take; `kind` names their run folders, `modes` are the --fine-tune-mode
    choices (the first is the default)."""
    ap = Parser(prog=prog, description=description, absent=BERT_ONLY)
    ap.add_argument("--fine-tune-mode", dest="fine_tune_mode", choices=modes, default=modes[0],
                    help="what trains: " + ", ".join(MODE_WORDS[m] for m in modes))
    ap.add_argument("--lr", type=positive_float, default=None,
                    help="by default 1e-3 where only new weights train (the head, adapters), 1e-5 for "
                         "full-model (the handout's); --optimizer lion takes a third of it, lamb five times")
    ap.add_argument("--hidden_dropout_prob", type=probability, default=0.3, help="dropout before "
                                                                                 "the classifier head")
    ap.add_argument("--data_dir", default="../data", help="the folder of the course "
                                                          "CSVs (the project's data/)")
    ap.add_argument("--predictions_dir", default="predictions",
                    help="where the leaderboard files of this run are copied (the run folder keeps its own)")
    return _shared(ap, kind, "examples", MAX_LENGTH["gpt2-classifier"])


def _shared(ap, kind, what, max_length):
    """The flags every GPT-2 script takes, and the shared speed, recipe and run-folder groups."""
    ap.add_argument("--use_gpu", action="store_true", help="train on the GPU (CUDA, or Apple's MPS)")
    ap.add_argument("--batch_size", type=positive_int, default=8, help=f"{what} per optimizer step")
    ap.add_argument("--epochs", type=positive_int, default=10, help="passes over the training set")
    ap.add_argument("--seed", type=seed, default=11711, help="seeds every random draw (sampling "
                                                             "too): a run is repeatable")
    ap.add_argument("--pretrained", default="gpt2",
                    help="gpt2, gpt2-medium, gpt2-large, gpt2-xl (downloaded "
                         "once) or a checkpoint folder in HF's layout")
    ap.add_argument("--max_length", type=positive_int, default=max_length,
                    help="tokens per input, at most the model's positions")
    add_speed_flags(ap, bert=False)
    add_recipe_flags(ap, {}, bert=False)  # the regularisers GPT-2 takes, each off by default
    add_run_flags(ap, kind, "--checkpoint_dir")
    return ap


def parse(parser, argv=None, idle=None):
    """A GPT-2 script's flags, parsed with --recipe handout's defaults in force when it is given, and
    checked: a typed flag that `idle` (rules.py's form) says would change nothing, or a --max_length above
    the model's positions is one line."""
    args = parse_flags(parser, argv, {})
    typed = args.typed
    check_idle_flags(vars(args), typed, {**GPT2_IDLE, **(idle or {})})
    # the default is held to the model's positions (_gpt2_values); a typed value is not
    if "max_length" in typed:
        limit = gpt2_config(args.pretrained).max_position_embeddings
        if args.max_length > limit:
            raise MinbertError(f"--max_length {args.max_length}: {args.pretrained} "
                               f"has {limit} positions, so at most --max_length {limit}")
    return args


def parse_classifier(argv=None):
    return parse(classifier_parser(), argv, CLASSIFIER_IDLE)


def parse_paraphrase(argv=None):
    return parse(paraphrase_parser(), argv, PARAPHRASE_IDLE)


def parse_sonnets(argv=None):
    return parse(sonnet_parser(), argv, SONNET_IDLE)


def classifier_parser():
    ap = _parser("classifier.py", "gpt2-classifier", "Build GPT-2, Part 1: sentiment on SST "
                                                     "and CFIMDB from GPT-2's last token.",
                 ["last-linear-layer", "full-model", "lora", "dora", "adapter"])
    add_adapter_flags(ap)
    ap.add_argument("--datasets", nargs="+", choices=["sst", "cfimdb"], default=["sst", "cfimdb"],
                    help="which datasets to train on, one after the other")
    return ap


def paraphrase_parser():
    ap = _parser("paraphrase_detection.py", "gpt2-paraphrase",
                 "Build GPT-2, Part 2: Quora paraphrase detection as a cloze task (the LM "
                                            "answers yes or no).", ["full-model"])
    ap.set_defaults(datasets=["quora"], merge=False, adapter_dim=64, prefix_length=10, **ADAPTER_DEFAULTS)
    for split in ("dev", "test"):  # the handout's flags, defaulting to --predictions_dir's file
        ap.add_argument(f"--para_{split}_out", default=None,
                        help=f"where this run's {split} predictions are copied (default: PREDICTIONS_DIR/"
                             f"para-{split}-output.csv; the run folder keeps its own)")
    return ap


def gpt2_config(pretrained):
    try:
        return GPT2Config.from_json_file(resolve_pretrained(pretrained).require("config").config)
    except ConfigError as e:
        raise MinbertError(str(e)) from None


def _gpt2_values(args):
    """The parsed flags, --max_length held to the model's positions (the default asks for
    more than a small GPT-2 has)."""
    v = dict(vars(args))
    v["max_length"] = min(v["max_length"], gpt2_config(v["pretrained"]).max_position_embeddings)
    return v


def classifier_settings(args):
    """ClassifierSettings of the parsed flags, for minbert's Part 1 pipeline with
    GPT-2's (gpt2/sentiment.py)."""
    v = _gpt2_values(args)
    if v["fine_tune_mode"] not in ("lora", "dora"):
        changed = [k for k, d in ADAPTER_DEFAULTS.items() if v[k] != d] + (["merge"] if v["merge"] else [])
        if changed:
            raise MinbertError(f"--{changed[0]} configures LoRA/DoRA adapters, but --fine-tune-mode is "
                               f"{v['fine_tune_mode']}: give --fine-tune-mode lora or dora, or drop it")
    if v["prefix_length"] != 10:
        raise MinbertError(f"--prefix_length {v['prefix_length']}: prefix tuning is BERT's here, not GPT-2's")
    if v["adapter_dim"] != 64 and v["fine_tune_mode"] != "adapter":
        raise MinbertError(f"--adapter_dim {v['adapter_dim']} sizes Houlsby adapters, but --fine-tune-mode "
                           f"is {v['fine_tune_mode']}: give --fine-tune-mode adapter, or drop it")
    v["lr"], why = resolve_lr(v["lr"], v["fine_tune_mode"], v["optimizer"], None, FULL_MODEL_LR)
    pipeline = f"gpt2-{'paraphrase' if v['datasets'] == ['quora'] else 'classifier'}"
    model = from_flags(ModelSpec, v, pipeline=pipeline, dropout=[v["hidden_dropout_prob"]])
    return from_flags(ClassifierSettings, v, model=model, recipe=recipe(v, v["lr"], why),
                      regularizers=regularizers(v), runtime=runtime(v), run=run_spec(v, v["lr"]),
                      datasets=tuple(v["datasets"]),
                      published={("quora", split): v[f"para_{split}_out"] for split in ("dev", "test")
                                 if v.get(f"para_{split}_out")})


def sonnet_parser():
    ap = Parser(prog="sonnet_generation.py", description="Build GPT-2, Part 2: fine-tune on the sonnets, "
                                                         "then complete held-out ones "
                                                         "from their first three lines.", absent=BERT_ONLY)
    ap.add_argument("--sonnet_path", default="../data/sonnets.txt", help="the training sonnets")
    ap.add_argument("--held_out_sonnet_path", default="../data/sonnets_held_out.txt",
                    help="the test sonnets' first lines, to complete")
    ap.add_argument("--held_out_dev_path", default="../data/sonnets_held_out_dev.txt",
                    help="the dev sonnets' first lines, to complete and score")
    ap.add_argument("--true_dev_path", default="../data/TRUE_sonnets_held_out_dev.txt",
                    help="the whole dev sonnets: chrF's references and the perplexity's text")
    ap.add_argument("--sonnet_out", default="predictions/generated_sonnets.txt",
                    help="where the completions are copied")
    ap.add_argument("--decoding", choices=["sample", "greedy", "beam"], default="sample",
                    help="how completions are written: sample (temperature and top-p), greedy, or beam (beam "
                         "search, the best of --num_beams hypotheses)")
    ap.add_argument("--temperature", type=positive_float, default=1.2, help="sampling temperature")
    ap.add_argument("--top_p", type=share, default=0.9, help="nucleus sampling's p (1: no cut)")
    ap.add_argument("--num_beams", type=positive_int, default=4, help="beam search's beams (1: greedy)")
    ap.add_argument("--length_penalty", type=finite_float, default=1.0,
                    help="a finished hypothesis' score is its log-probability over its length to this power "
                         "(above 0 favours longer ones, below 0 shorter)")
    ap.add_argument("--no_repeat_ngram_size", type=nonneg_int, default=0,
                    help="beam search never repeats an n-gram of this many tokens (0: off)")
    ap.add_argument("--early_stopping", type=early_stopping, default=False, metavar="{false,true,never}",
                    help="when beam search ends, as HF's generate(early_stopping=...): false (HF's default) once "
                         "no unfinished hypothesis could beat the --num_beams finished ones, true as soon as that "
                         "many have finished, never: as false, scoring an unfinished one at its longest length")
    ap.add_argument("--max_line_tokens", type=positive_int, default=24, help="a line ends here "
                                                                             "if no newline came")
    ap.add_argument("--lr", type=positive_float, default=None,
                    help="by default 1e-5 (the handout's); --optimizer lion takes a third of it, lamb five times")
    return _shared(ap, "gpt2-sonnet", "sonnets", MAX_LENGTH["gpt2-sonnet"])


def sonnet_settings(args):
    """SonnetSettings of the parsed flags (gpt2/sonnets.py)."""
    v = _gpt2_values(args)
    on = regularizer_weights(regularizers(v))
    if on:  # the language-model loss (gpt2/sonnets.py lm_loss) adds no regulariser
        r = REGULARIZERS[next(iter(on))]
        raise MinbertError(f"--{r.weight} {on[r.name]:g}: {r.label} regularises a prediction of a label, and "
                           "the sonnets have none (their loss is the language model's alone): drop it")
    model = from_flags(ModelSpec, v, pipeline="gpt2-sonnet")
    v["lr"], why = resolve_lr(v["lr"], "full-model", v["optimizer"], None, FULL_MODEL_LR)
    return from_flags(SonnetSettings, v, model=model, recipe=recipe(v, v["lr"], why),
                      runtime=runtime(v), run=run_spec(v, v["lr"]))
