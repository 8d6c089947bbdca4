"""The GPT-2 scripts' flags, rows of the one table of flags (minbert/flags/table.py: scripts gpt2-classifier,
gpt2-paraphrase and gpt2-sonnet), and the settings they become: the same frozen objects (minbert/specs.py) the
BERT pipelines take.

Part 1's flags are the handout's (--fine-tune-mode, --batch_size, --lr, --hidden_dropout_prob, --epochs,
--use_gpu, --seed) with the shared speed, recipe and run-folder flags; `--recipe handout` puts the shared
recipe's defaults back to the handout's plain training (constant lr, no warm-up or clipping), as in minBERT.
The levers that reach into BERT's own modules (SMART's embedding perturbation and every flag shaping it,
--freeze_layers, --gradual_unfreeze, --llrd, --no_fast_dropout) are not these scripts' rows, and typed they
are one line saying why (each row's `not_gpt2`); so is a flag typed where it would change nothing (its row's
rule)."""
from gpt2.config import ConfigError, GPT2Config
from minbert.cli import MinbertError
from minbert.finetuning.modes import ADAPTER_MODES
from minbert.flag import G1, GP, GS
from minbert.flags import parsers
from minbert.flags.defaults import handout, resolve_lr
from minbert.flags.settings import from_flags, recipe, regularizers, run_spec, runtime, values
from minbert.flags.typed import check_idle_flags, parse_flags
from minbert.hub import resolve_pretrained
from minbert.objectives.regularizers import REGULARIZERS, regularizer_weights
from minbert.specs import ClassifierSettings, ModelSpec, SonnetSettings

ADAPTER_FLAGS = ("lora_rank", "lora_alpha", "lora_dropout", "lora_targets")


def parse(script, argv=None):
    """A GPT-2 script's flags, parsed with --recipe handout's defaults in force when it is given, and
    checked: a typed flag its rules (the table's) say would change nothing, or a --max_length above the
    model's positions is one line."""
    args = parse_flags(parsers.parser(script), argv, handout(script))
    typed = args.typed
    check_idle_flags(values(args, script), typed, parsers.idle_rules(script))
    # the default is held to the model's positions (_gpt2_values); a typed value is not
    if "max_length" in typed:
        if args.max_length < 2:  # one token leaves nothing to predict: a loss of 0 and a perplexity of 1 mean nothing
            raise MinbertError(f"--max_length {args.max_length}: at least 2 tokens, one to predict the next from")
        limit = gpt2_config(args.pretrained).max_position_embeddings
        if args.max_length > limit:
            raise MinbertError(f"--max_length {args.max_length}: {args.pretrained} "
                               f"has {limit} positions, so at most --max_length {limit}")
    return args


def parse_classifier(argv=None):
    return parse(G1, argv)


def parse_paraphrase(argv=None):
    return parse(GP, argv)


def parse_sonnets(argv=None):
    return parse(GS, argv)


def classifier_parser():
    return parsers.parser(G1)


def paraphrase_parser():
    return parsers.parser(GP)


def sonnet_parser():
    return parsers.parser(GS)


def gpt2_config(pretrained):
    try:
        return GPT2Config.from_json_file(resolve_pretrained(pretrained).require("config").config)
    except ConfigError as e:
        raise MinbertError(str(e)) from None


def _gpt2_values(args, script):
    """The parsed flags, --max_length held to the model's positions (the default asks for
    more than a small GPT-2 has)."""
    flags = values(args, script)
    flags["max_length"] = min(flags["max_length"], gpt2_config(flags["pretrained"]).max_position_embeddings)
    return flags


def classifier_settings(args):
    """ClassifierSettings of the parsed flags, for minbert's Part 1 pipeline with GPT-2's (gpt2/sentiment.py)."""
    script = G1 if "datasets" in vars(args) else GP  # the cloze task takes no --datasets: it is Quora's
    flags = _gpt2_values(args, script)
    # a flag typed for a mode the run does not train, even at its default value, is refused: it does nothing
    if flags["fine_tune_mode"] not in ADAPTER_MODES:
        changed = [k for k in ADAPTER_FLAGS if k in args.typed] + (["merge"] if flags["merge"] else [])
        if changed:
            raise MinbertError(f"--{changed[0]} configures LoRA/DoRA adapters, but --fine-tune-mode is "
                               f"{flags['fine_tune_mode']}: give --fine-tune-mode lora or dora, or drop it")
    if "adapter_dim" in args.typed and flags["fine_tune_mode"] != "adapter":
        raise MinbertError(f"--adapter_dim {flags['adapter_dim']} sizes Houlsby adapters, but --fine-tune-mode "
                           f"is {flags['fine_tune_mode']}: give --fine-tune-mode adapter, or drop it")
    # the default rate: the rows of minbert/flags/defaults.py, as minBERT's (the GPT-2 handout's for the whole model)
    flags["lr"], why = resolve_lr(flags["lr"], script, flags["fine_tune_mode"], flags["optimizer"], None,
                                  flags["recipe"])
    model = from_flags(ModelSpec, flags, pipeline=script, dropout=[flags["hidden_dropout_prob"]])
    train = recipe(flags, flags["lr"], why)
    return from_flags(ClassifierSettings, flags, model=model, recipe=train,
                      regularizers=regularizers(flags), runtime=runtime(flags, train), run=run_spec(flags, flags["lr"], args.typed),
                      datasets=tuple(flags["datasets"]),
                      published={("quora", split): flags[f"para_{split}_out"] for split in ("dev", "test")
                                 if flags.get(f"para_{split}_out")})


def sonnet_settings(args):
    """SonnetSettings of the parsed flags (gpt2/sonnets.py)."""
    flags = _gpt2_values(args, GS)
    on = regularizer_weights(regularizers(flags))
    if on:  # the language-model loss (gpt2/sonnets.py lm_loss) adds no regulariser
        r = REGULARIZERS[next(iter(on))]
        raise MinbertError(f"--{r.weight} {on[r.name]:g}: {r.label} regularises a prediction of a label, and "
                           "the sonnets have none (their loss is the language model's alone): drop it")
    model = from_flags(ModelSpec, flags, pipeline="gpt2-sonnet")
    flags["lr"], why = resolve_lr(flags["lr"], GS, "full-model", flags["optimizer"], None, flags["recipe"])
    train = recipe(flags, flags["lr"], why)
    return from_flags(SonnetSettings, flags, model=model, recipe=train, runtime=runtime(flags, train),
                      run=run_spec(flags, flags["lr"], args.typed))
