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
from minbert.cli import MinbertError, main_print
from minbert.course_data import MULTITASK, TASK_PREFIX, data_file
from minbert.flags import parsers
from minbert.flags.defaults import (DEFAULT_REGULARIZERS, FULL_MODEL_LR, HANDOUT_RECIPE, MULTITASK_HANDOUT,
                                    REGULARIZER_WEIGHTS, resolve_lr, resolve_record_step)
from minbert.flags.parsers import (ARCHITECTURE, EVAL_ONLY_FLAGS, classifier_parser, multitask_parser, pretrain_parser)
from minbert.flags.rules import check_classifier_combination, check_multitask_combination
from minbert.flags.table import BENCH, P1, P2, PRE
from minbert.flags.typed import check_idle_flags, parse_flags
from minbert.hub import check_max_length, checkpoint_config
from minbert.precision import resolve_amp
from minbert.shapes import resolve_pad_multiple
from minbert.runs.folders import best_checkpoint
from minbert.runs.identity import defining_flags, flag_spelling
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


def regularizers(v):
    """Regularizers from the parsed flags ({destination: value}, their weights resolved)."""
    return from_flags(Regularizers, v)


def recipe(v, lr, lr_why):
    """Recipe from the parsed flags, with the learning rate resolved (defaults.resolve_lr)."""
    surgery = "pcgrad" if v.get("pcgrad") else "gradvac" if v.get("gradvac") else None
    return from_flags(Recipe, v, lr=lr, lr_why=lr_why, surgery=surgery)


def runtime(v, train_recipe=None, log=main_print, eager=None):
    """Runtime for this machine: the device, --amp auto, --pad_multiple and the training step of
    `train_recipe` (the run's Recipe; None for a command that only evaluates) resolved for it, eager or
    recorded on a GPU unless --no_record_step (`eager`: a pipeline's own reason for the eager step), a line
    saying each."""
    device = get_device(v["use_gpu"])
    amp, why = resolve_amp(v["amp"], device)
    log(f"precision: {why}")
    record_step = False
    if train_recipe is not None:
        record_step, path = resolve_record_step(v, train_recipe, device, amp, distributed()[1], eager)
        if v.get("compile"):  # nothing else is printed while Inductor compiles, which can take minutes
            path += (", with --compile: torch.compile (Inductor) compiles the model first, which takes "
                     + ("minutes on a CPU" if device.type == "cpu" else "a minute or two")
                     + " before the first step, then a little more at each new batch shape")
        log(f"training step: {path}")
    pad = resolve_pad_multiple(v["pad_multiple"], device)
    if record_step:
        log(f"fixed shapes: every training batch {v['batch_size']} rows (a short one filled with rows of "
            "loss weight 0), its width the smallest of a few chosen from the data (minbert/shapes.py)")
    elif pad:
        log(f"fixed shapes: each batch padded to a multiple of {pad} tokens (--pad_multiple; 0 turns it off)")
    return Runtime(device=device, amp=amp, attn=v["attn"], pad_multiple=pad, compile=v.get("compile", False),
                   fast_dropout=v.get("fast_dropout", True), tensorboard=v.get("tensorboard", False),
                   record_step=record_step)


def _lr(v):
    """(lr, why) for the run: --lr, or the default for what trains and the checkpoint's width."""
    return resolve_lr(v["lr"], v["fine_tune_mode"], v["optimizer"],
                      checkpoint_config(v["pretrained"]).hidden_size)


def run_spec(v, lr, stem=None):
    """RunSpec of the parsed flags: the run folder, --resume, --backup, and the run-defining flags with the
    learning rate resolved."""
    return RunSpec(name=v["run_name"], dir=v["run_dir"], resume=v["resume"], backup=v["backup"], stem=stem,
                   flags=defining_flags({**v, "lr": lr}))


# ----------------------------------------------------------------------------- Part 1: classifier.py

def _classifier_values(args):
    """The parsed flags with the defaults that depend on the fine-tune mode resolved: the handout recipe's
    full-model rate, and the regularisers (they need BERT in the graph: by default full-model only)."""
    v = values(args, P1)
    if v["lr"] is None and v["fine_tune_mode"] == "full-model" and v["recipe"] == "handout":
        v["lr"] = FULL_MODEL_LR["handout"]
    for name in REGULARIZER_WEIGHTS:
        if v[name] is None:
            v[name] = DEFAULT_REGULARIZERS["classifier"][name] if v["fine_tune_mode"] == "full-model" else 0.0
    return v


def parse_classifier(argv=None):
    """classifier.py's flags, parsed and checked (one line for a flag that cannot do what it says)."""
    args = parse_flags(classifier_parser(), argv, HANDOUT_RECIPE)
    v = _classifier_values(args)
    check_idle_flags(v, args.typed, parsers.idle_rules(P1))
    check_classifier_combination(v)
    return args


def classifier_settings(args, log=main_print):
    v = _classifier_values(args)
    check_max_length(v["max_length"], v["pretrained"])
    lr, why = _lr(v)
    train = recipe(v, lr, why)
    run_time = runtime(v, train, log)
    model = from_flags(ModelSpec, v, pipeline="classifier", dropout=[v["hidden_dropout_prob"]])
    return from_flags(ClassifierSettings, v, model=model, recipe=train, regularizers=regularizers(v),
                      runtime=run_time, run=run_spec(v, lr), datasets=tuple(v["datasets"]))


# ---------------------------------------------------------------------------- Part 2: multitask_classifier.py

def _multitask_values(args):
    """The parsed flags with --task_dropout and the data files (--sst_train, ...
    under --data_dir) filled in."""
    v = values(args, P2)
    if v["task_dropout"] is None:
        v["task_dropout"] = [v["hidden_dropout_prob"]] * 3
    for task, prefix in TASK_PREFIX.items():
        for split in ("train", "dev", "test"):
            if v[f"{prefix}_{split}"] is None:
                v[f"{prefix}_{split}"] = str(data_file(v["data_dir"], task, split))
    return v


def parse_multitask(argv=None):
    """multitask_classifier.py's flags, parsed and checked (one line for a flag
    that cannot do what it says)."""
    args = parse_flags(multitask_parser(), argv, {**HANDOUT_RECIPE, **MULTITASK_HANDOUT})
    typed, v = args.typed, _multitask_values(args)
    if v["eval_only"]:
        ignored = sorted(typed - EVAL_ONLY_FLAGS - {"checkpoint_name"})  # --checkpoint sets run_dir and that
        if ignored:
            main_print(f"--eval_only re-scores the saved model, so the training flags "
                       f"{', '.join(map(flag_spelling, ignored))} change nothing")
    else:
        check_idle_flags(v, typed, parsers.idle_rules(P2))
        check_multitask_combination(v)
    if v["sampler"] == "all" and distributed()[1] > 1:
        raise MinbertError("--sampler all (and --pcgrad, --gradvac) run in one "
                           "process only; drop torchrun or pick another sampler")
    return args


def multitask_model(v):
    """The ModelSpec of a multitask_classifier.py run."""
    return from_flags(ModelSpec, v, pipeline="multitask", dropout=v["task_dropout"],
                      extra_tasks=[parse_extra(e)[0] for e in v["extra_task"]])


def multitask_settings(args, log=main_print):
    """MultitaskSettings of a parsed command line (parse_multitask's Flags, which know the flags typed)."""
    v, typed = _multitask_values(args), args.typed
    if v["eval_only"] and Path(v["eval_only"]).is_dir():  # a run's folder stands for its best checkpoint
        best = best_checkpoint(v["eval_only"], "multitask", "--eval_only")
        log(f"--eval_only {v['eval_only']}: a run folder; its checkpoint {best} is re-scored")
        v["eval_only"] = str(best)
    train = None
    if not v["eval_only"]:
        check_max_length(v["max_length"], v["pretrained"])
        lr, why = _lr(v)
        train = recipe(v, lr, why)
    run_time = runtime(v, train, log)
    data = from_flags(MultitaskData, v, extra=tuple(parse_extra(e) for e in v["extra_task"]),
                      paths={t: {s: v[f"{TASK_PREFIX[t]}_{s}"] for s in ("train", "dev",
                                                                         "test")} for t in MULTITASK},
                      sampler="sequential" if v["sequential"] else v["sampler"],
                      fold=tuple(v["fold"]) if v["fold"] else None)
    published = {(t, s): v[f"{TASK_PREFIX[t]}_{s}_out"] for t in MULTITASK for s in ("dev", "test")}
    common = dict(data=data, runtime=run_time, published=published, model=multitask_model(v))
    if v["eval_only"]:
        return from_flags(MultitaskSettings, v, recipe=Recipe(lr=v["lr"] or 0.0),
                          given={k: v[k] for k in ARCHITECTURE if k in typed},
                          max_length_given="max_length" in typed,
                          run=RunSpec(name=v["run_name"], dir=v["run_dir"], backup=v["backup"]), **common)
    losses = from_flags(TaskLosses, v, weights=dict(zip(MULTITASK, v["loss_weights"])))
    return from_flags(MultitaskSettings, v, recipe=train, losses=losses,
                      regularizers=regularizers(v), run=run_spec(v, lr, v["checkpoint_name"]),
                      results_given="results" in typed, **common)


# ----------------------------------------------------------------------------- pretrain.py

def parse_pretrain(argv=None):
    """pretrain.py's flags, parsed and checked (one line for a flag that would change nothing)."""
    args = parse_flags(pretrain_parser(), argv)
    check_idle_flags(values(args, PRE), args.typed, parsers.idle_rules(PRE))
    return args


def pretrain_settings(args, log=print):
    v = values(args, PRE)
    if v["mask_prob"] == 0:
        raise MinbertError(f"--mask_prob {v['mask_prob']}: masks no token, so there is nothing to predict "
                           "and the loss is 0 at every step: give a share above 0 (BERT's is 0.15)")
    check_max_length(v["max_length"], v["pretrained"])
    train = recipe(v, v["lr"], f"lr {v['lr']:g}")
    run_time = runtime(v, train, log, eager="the masked-LM head reads only the masked positions, a number that "
                                            "changes with every batch")
    corpus = v["corpus"] or ("cfimdb" if v["nsp"] else "tasks")
    if v["nsp"] and corpus == "tasks" and not v["texts"]:
        raise MinbertError(f"--nsp {v['nsp']:g} --corpus tasks: the task sentences are single sentences, not "
                           "documents, so none has a next one: give --corpus cfimdb or sonnets, or --texts")
    return from_flags(PretrainSettings, v, recipe=train, runtime=run_time,
                      corpus=corpus, run=RunSpec(dir=v["out"], resume=v["resume"], flags=defining_flags(v)))


# ----------------------------------------------------------------------------- the other commands

def ensemble_settings(args):
    v = vars(args)
    return from_flags(EnsembleSettings, v, members=tuple(v["members"]),
                      runtime=runtime(v, None, print),
                      run=RunSpec(name=v["run_name"], dir=v["run_dir"], backup=v["backup"]))


def sweep_settings(args, base, command):
    """SweepSettings of sweep.py's own flags; `base` are the flags after --, `command` the sweep's argv."""
    v = vars(args)
    return from_flags(SweepSettings, v, space=tuple(v["space"]), base=tuple(base), command=tuple(command),
                      seeds=tuple(v["seeds"]))


def bench_settings(args):
    """(BenchSettings, the precision's reason) of bench.py's flags."""
    v = values(args, BENCH)
    config = checkpoint_config(v["pretrained"]) if v["pretrained"] else BertConfig(**SHAPES[v["config"]])
    limit = config.max_position_embeddings
    if v["seq_len"] > limit:
        raise MinbertError(f"--seq_len {v['seq_len']}: longer than the model's {limit} position embeddings "
                           f"({v['pretrained'] or '--config ' + v['config']}); give at most {limit}")
    # bench.py times AdamW's step on one batch at a time (bench/candidate.py): the plain Recipe's
    run_time = runtime({**v, "tensorboard": False}, Recipe(lr=0.0), print)
    why = resolve_amp(v["amp"], run_time.device)[1]
    return from_flags(BenchSettings, v, runtime=run_time, regularizers=regularizers(v)), why
