"""The one place that parses and reads what argparse parsed: it parses a script's flags once, knowing which
were typed (parse_flags), checks them against each other (rules.py), resolves the defaults that depend on
other flags, the machine or the checkpoint (the regularisers' weights, the precision, the padding multiple,
the learning rate), and returns the frozen settings the library takes (specs.py), each built from the flags
named as its fields (from_flags). Below this module nothing sees an argparse Namespace.

    args = parse_multitask(argv)                     # flags parsed and checked: one line for a bad one
    settings = multitask_settings(args)              # typed, resolved, frozen
    run_multitask(settings)                          # pipelines/multitask.py
"""
import dataclasses
from pathlib import Path

from config import SHAPES, BertConfig
from minbert.cli import MinbertError, flag_spelling, main_print
from minbert.course_data import MULTITASK, TASK_PREFIX, data_file
from minbert.flag import BENCH, P1, P2, PRE
from minbert.flags import defaults, parsers
from minbert.flags.defaults import REGULARIZER_WEIGHTS, handout, resolve_lr, resolve_record_step
from minbert.flags.parsers import (ARCHITECTURE, EVAL_ONLY_FLAGS, classifier_parser, multitask_parser, pretrain_parser)
from minbert.flags.rules import check_classifier_combination, check_multitask_combination
from minbert.flags.typed import check_idle_flags, parse_flags
from minbert.hub import check_max_length, checkpoint_config
from minbert.precision import resolve_amp
from minbert.shapes import resolve_pad_multiple
from minbert.runs.folders import best_checkpoint
from minbert.runs.identity import defining_flags
from minbert.objectives.regularizers import Regularizers
from minbert.specs import (BenchSettings, ClassifierSettings, EnsembleSettings, ModelSpec, MultitaskData,
                           MultitaskSettings, PretrainSettings, Recipe, RunSpec, Runtime, SweepSettings,
                           TaskLosses)
from minbert.tasks.extra import parse_extra
from utils import distributed, get_device


# ----------------------------------------------------------------------------- parsing, once

def values(args, script):
    """The parsed flags as {destination: value}, with each flag `script` does not take at its value there
    (parsers.defaults: pretrain.py's recipe, Build GPT-2's cloze task's adapters)."""
    return {**parsers.defaults(script), **vars(args)}


# ---------------------------------------------------------------------------- the parts every pipeline shares

def from_flags(cls, values, **resolved):
    """The settings dataclass `cls` built from parsed flags `values` ({destination: value}): each field named
    as a flag's destination takes its value, `resolved` (what depends on other flags, the machine or the
    checkpoint) overrides, the other fields keep their defaults. So a new flag reaches the library through
    its row (flags/table.py) and a field of the same name, and nothing else."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{**{k: v for k, v in values.items() if k in names}, **resolved})


def regularizers(flags):
    """Regularizers from the parsed flags ({destination: value}, their weights resolved)."""
    return from_flags(Regularizers, flags)


def recipe(flags, lr, lr_why):
    """Recipe from the parsed flags, with the learning rate resolved (defaults.resolve_lr)."""
    surgery = "pcgrad" if flags.get("pcgrad") else "gradvac" if flags.get("gradvac") else None
    return from_flags(Recipe, flags, lr=lr, lr_why=lr_why, surgery=surgery)


def runtime(flags, train_recipe=None, log=main_print, eager=None):
    """Runtime for this machine: the device, --amp auto, --pad_multiple and the training step of
    `train_recipe` (the run's Recipe; None for a command that only evaluates) resolved for it, eager or
    recorded on a GPU unless --no_record_step (`eager`: a pipeline's own reason for the eager step), a line
    saying each."""
    device = get_device(flags["use_gpu"])
    amp, why = resolve_amp(flags["amp"], device)
    log(f"precision: {why}")
    record_step = False
    if train_recipe is not None:
        record_step, path = resolve_record_step(flags, train_recipe, device, amp, distributed()[1], eager)
        if flags.get("compile"):  # nothing else is printed while Inductor compiles, which can take minutes
            path += (", with --compile: torch.compile (Inductor) compiles the model first, which takes "
                     + ("minutes on a CPU" if device.type == "cpu" else "a minute or two")
                     + " before the first step, then a little more at each new batch shape")
        log(f"training step: {path}")
    pad = resolve_pad_multiple(flags["pad_multiple"], device)
    if record_step:
        log(f"fixed shapes: every training batch {flags['batch_size']} rows (a short one filled with rows of "
            "loss weight 0), its width the smallest of a few chosen from the data (minbert/shapes.py)")
    elif pad:
        log(f"fixed shapes: each batch padded to a multiple of {pad} tokens (--pad_multiple; 0 turns it off)")
    return Runtime(device=device, amp=amp, attn=flags["attn"], pad_multiple=pad, compile=flags.get("compile", False),
                   fast_dropout=flags.get("fast_dropout", True), tensorboard=flags.get("tensorboard", False),
                   record_step=record_step)


def _lr(flags, typed, script):
    """(lr, why) for the run: --lr as typed, or the default flags/defaults.py's rows give for what trains, the
    checkpoint's width, the optimizer and --recipe (a rate --recipe handout put in force is the rows' too)."""
    return resolve_lr(flags["lr"] if "lr" in typed else None, script, flags["fine_tune_mode"], flags["optimizer"],
                      checkpoint_config(flags["pretrained"]).hidden_size, flags["recipe"])


def run_spec(flags, lr, typed, stem=None):
    """RunSpec of the parsed flags: the run folder, --resume, --backup, the run-defining flags with the
    learning rate resolved, and which flags were typed (`typed`, for the outputs' messages)."""
    return RunSpec(name=flags["run_name"], dir=flags["run_dir"], resume=flags["resume"], backup=flags["backup"],
                   stem=stem, flags=defining_flags({**flags, "lr": lr}), typed=frozenset(typed))


# ----------------------------------------------------------------------------- Part 1: classifier.py

# Each regulariser weight's own default (its flag's, objectives/): what stands where no row sets it.
_OWN = {f.name: f.default for f in dataclasses.fields(Regularizers)}


def _classifier_values(args):
    """The parsed flags with the regularisers' weights, which depend on the fine-tune mode, resolved: a row of
    flags/defaults.py's table where one holds (they need BERT in the graph: full-model only), else the flag's own
    default (0: off)."""
    flags = values(args, P1)
    for name in REGULARIZER_WEIGHTS:
        if flags[name] is None:
            flags[name] = defaults.value(name, P1, _OWN[name], flags["recipe"], flags["fine_tune_mode"])
    return flags


def parse_classifier(argv=None):
    """classifier.py's flags, parsed and checked (one line for a flag that cannot do what it says)."""
    args = parse_flags(classifier_parser(), argv, handout(P1))
    flags = _classifier_values(args)
    check_idle_flags(flags, args.typed, parsers.idle_rules(P1))
    check_classifier_combination(flags)
    return args


def classifier_settings(args, log=main_print):
    flags = _classifier_values(args)
    check_max_length(flags["max_length"], flags["pretrained"])
    lr, why = _lr(flags, args.typed, P1)
    train = recipe(flags, lr, why)
    run_time = runtime(flags, train, log)
    model = from_flags(ModelSpec, flags, pipeline="classifier", dropout=[flags["hidden_dropout_prob"]])
    return from_flags(ClassifierSettings, flags, model=model, recipe=train, regularizers=regularizers(flags),
                      runtime=run_time, run=run_spec(flags, lr, args.typed), datasets=tuple(flags["datasets"]))


# ---------------------------------------------------------------------------- Part 2: multitask_classifier.py

def _multitask_values(args):
    """The parsed flags with --task_dropout and the data files (--sst_train, ... under --data_dir) filled in."""
    flags = values(args, P2)
    if flags["task_dropout"] is None:
        flags["task_dropout"] = [flags["hidden_dropout_prob"]] * 3
    for task, prefix in TASK_PREFIX.items():
        for split in ("train", "dev", "test"):
            if flags[f"{prefix}_{split}"] is None:
                flags[f"{prefix}_{split}"] = str(data_file(flags["data_dir"], task, split))
    return flags


def parse_multitask(argv=None, prog=None, description=None):
    """multitask_classifier.py's flags, parsed and checked (one line for a flag that cannot do what it says);
    `prog` and `description` name another command that takes them (a tool), in its usage and messages."""
    args = parse_flags(multitask_parser(prog, description), argv, handout(P2))
    typed, flags = args.typed, _multitask_values(args)
    if flags["eval_only"]:
        ignored = sorted(typed - EVAL_ONLY_FLAGS - {"checkpoint_name"})  # --checkpoint sets run_dir and that
        if ignored:
            main_print(f"--eval_only re-scores the saved model, so the training flags "
                       f"{', '.join(map(flag_spelling, ignored))} change nothing")
    else:
        check_idle_flags(flags, typed, parsers.idle_rules(P2))
        check_multitask_combination(flags)
    if flags["sampler"] == "all" and distributed()[1] > 1:
        raise MinbertError("--sampler all (and --pcgrad, --gradvac) run in one "
                           "process only; drop torchrun or pick another sampler")
    return args


def multitask_model(flags):
    """The ModelSpec of a multitask_classifier.py run."""
    return from_flags(ModelSpec, flags, pipeline="multitask", dropout=flags["task_dropout"],
                      extra_tasks=[parse_extra(e)[0] for e in flags["extra_task"]])


def multitask_settings(args, log=main_print):
    """MultitaskSettings of a parsed command line (parse_multitask's Flags, which know the flags typed)."""
    flags, typed = _multitask_values(args), args.typed
    if flags["eval_only"] and Path(flags["eval_only"]).is_dir():  # a run's folder stands for its best checkpoint
        best = best_checkpoint(flags["eval_only"], "multitask", "--eval_only")
        log(f"--eval_only {flags['eval_only']}: a run folder; its checkpoint {best} is re-scored")
        flags["eval_only"] = str(best)
    train = None
    if not flags["eval_only"]:
        check_max_length(flags["max_length"], flags["pretrained"])
        lr, why = _lr(flags, typed, P2)
        train = recipe(flags, lr, why)
    run_time = runtime(flags, train, log)
    data = from_flags(MultitaskData, flags, extra=tuple(parse_extra(e) for e in flags["extra_task"]),
                      paths={t: {s: flags[f"{TASK_PREFIX[t]}_{s}"] for s in ("train", "dev",
                                                                         "test")} for t in MULTITASK},
                      sampler="sequential" if flags["sequential"] else flags["sampler"],
                      fold=tuple(flags["fold"]) if flags["fold"] else None)
    published = {(t, s): flags[f"{TASK_PREFIX[t]}_{s}_out"] for t in MULTITASK for s in ("dev", "test")}
    common = dict(data=data, runtime=run_time, published=published, model=multitask_model(flags))
    if flags["eval_only"]:
        return from_flags(MultitaskSettings, flags, recipe=Recipe(lr=flags["lr"] or 0.0),
                          given={k: flags[k] for k in ARCHITECTURE if k in typed},
                          max_length_given="max_length" in typed,
                          run=RunSpec(name=flags["run_name"], dir=flags["run_dir"], backup=flags["backup"],
                                      typed=frozenset(typed)), **common)
    losses = from_flags(TaskLosses, flags, weights=dict(zip(MULTITASK, flags["loss_weights"])))
    return from_flags(MultitaskSettings, flags, recipe=train, losses=losses,
                      regularizers=regularizers(flags), run=run_spec(flags, lr, typed, flags["checkpoint_name"]),
                      results_given="results" in typed, **common)


# ----------------------------------------------------------------------------- pretrain.py

def parse_pretrain(argv=None):
    """pretrain.py's flags, parsed and checked (one line for a flag that would change nothing)."""
    args = parse_flags(pretrain_parser(), argv)
    check_idle_flags(values(args, PRE), args.typed, parsers.idle_rules(PRE))
    return args


def pretrain_settings(args, log=print):
    flags = values(args, PRE)
    if flags["mask_prob"] == 0 and flags["nsp"]:  # the held-out masked accuracy picks the best epoch
        raise MinbertError(f"--mask_prob {flags['mask_prob']} --nsp {flags['nsp']:g}: masks no token, so the masked "
                           "LM has nothing to predict and the held-out accuracy that picks the best epoch is "
                           "undefined; next-sentence prediction alone is no pretraining this command runs: give "
                           "a share above 0 (BERT's is 0.15)")
    if flags["mask_prob"] == 0:
        raise MinbertError(f"--mask_prob {flags['mask_prob']}: masks no token, so there is nothing to predict "
                           "and the loss is 0 at every step: give a share above 0 (BERT's is 0.15)")
    check_max_length(flags["max_length"], flags["pretrained"])
    lr, why = resolve_lr(flags["lr"] if "lr" in args.typed else None, PRE, None, None, None)
    train = recipe(flags, lr, why)
    run_time = runtime(flags, train, log, eager="the masked-LM head reads only the masked positions, a number that "
                                            "changes with every batch")
    corpus = flags["corpus"] or ("cfimdb" if flags["nsp"] else "tasks")
    if flags["nsp"] and corpus == "tasks" and not flags["texts"]:
        raise MinbertError(f"--nsp {flags['nsp']:g} --corpus tasks: the task sentences are single sentences, not "
                           "documents, so none has a next one: give --corpus cfimdb or sonnets, or --texts")
    return from_flags(PretrainSettings, flags, recipe=train, runtime=run_time,
                      corpus=corpus, run=RunSpec(dir=flags["out"], resume=flags["resume"], flags=defining_flags(flags)))


# ----------------------------------------------------------------------------- the other commands

def ensemble_settings(args):
    flags = vars(args)
    return from_flags(EnsembleSettings, flags, members=tuple(flags["members"]),
                      runtime=runtime(flags, None, print),
                      run=RunSpec(name=flags["run_name"], dir=flags["run_dir"], backup=flags["backup"],
                                  typed=frozenset(args.typed)))


def sweep_settings(args, base, command):
    """SweepSettings of sweep.py's own flags; `base` are the flags after --, `command` the sweep's argv."""
    flags = vars(args)
    return from_flags(SweepSettings, flags, space=tuple(flags["space"]), base=tuple(base), command=tuple(command),
                      seeds=tuple(flags["seeds"]))


def bench_settings(args):
    """(BenchSettings, the precision's reason) of bench.py's flags."""
    flags = values(args, BENCH)
    config = checkpoint_config(flags["pretrained"]) if flags["pretrained"] else BertConfig(**SHAPES[flags["config"]])
    limit = config.max_position_embeddings
    if flags["seq_len"] > limit:
        raise MinbertError(f"--seq_len {flags['seq_len']}: longer than the model's {limit} position embeddings "
                           f"({flags['pretrained'] or '--config ' + flags['config']}); give at most {limit}")
    # bench.py times AdamW's step on one batch at a time (bench/candidate.py): the plain Recipe's
    run_time = runtime({**flags, "tensorboard": False}, Recipe(lr=0.0), print)
    why = resolve_amp(flags["amp"], run_time.device)[1]
    return from_flags(BenchSettings, flags, runtime=run_time, regularizers=regularizers(flags)), why
