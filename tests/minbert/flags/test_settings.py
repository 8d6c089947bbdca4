"""flags/settings.py: --amp auto is every script's default and the start says what it picked; --eval_only names
the training flags it ignores; a flag and the settings field it fills default alike."""
import dataclasses

import torch

import classifier
import multitask_classifier as mt
from minbert import precision
from minbert.flags import parsers
from minbert.objectives.regularizers import REGULARIZERS, Regularizers
from minbert.specs import (BenchSettings, ClassifierSettings, ModelSpec, MultitaskData, MultitaskSettings,
                           PretrainSettings, Recipe, RunSpec, Runtime, TaskLosses)
from tests.course import eval_only_args, part1_args, part2_args


def test_auto_is_every_scripts_default_and_says_what_it_picked(tmp_path, course_data, tiny_model, capsys):
    classifier.main(part1_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--datasets", "sst"))
    out = capsys.readouterr().out
    expected = precision.resolve_amp("auto", torch.device("cpu"))[1]
    assert f"precision: {expected}" in out and "(auto:" in out


def test_eval_only_names_the_training_flags_it_ignores(tmp_path, course_data, tiny_model, capsys):
    args = part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "1")
    mt.main(args)
    capsys.readouterr()
    mt.main(eval_only_args(args, tmp_path / "ck" / "mt.pt", tmp_path / "eval"))
    line = [l for l in capsys.readouterr().out.splitlines() if l.startswith("--eval_only re-scores")]
    assert len(line) == 1 and "--lr" in line[0] and "--epochs" in line[0] and "--pretrained" not in line[0]


# Flags whose default is not the settings field's, and why: resolved once the flags are read, or a pipeline's own.
RESOLVED = {
    "lr": "resolved from what trains, the checkpoint's width and the optimizer (flags/defaults.py resolve_lr)",
    "amp": "auto is resolved for the device (precision.py)",
    "pad_multiple": "resolved for the device (shapes.py)",
    "record_step": "resolved for the device and the run: recorded on a GPU unless something needs the eager step "
                   "(flags/defaults.py resolve_record_step)",
    "recipe": "--recipe names a set of defaults; the settings' recipe is the Recipe they make",
    "corpus": "pretrain.py's text follows --nsp: the task sentences alone, CFIMDB's reviews (documents) with it",
    "fine_tune_mode": "Part 1's default is the handout's (last-linear-layer), the dataclass's Part 2's (full-model)",
    **{r.weight: "each pipeline's weight under --recipe best (objectives/regularizers.py)"
       for r in REGULARIZERS.values()},
}
GPT2_OWN = {"pretrained": "GPT-2's scripts start from GPT-2's checkpoint",
            "data_dir": "GPT-2's scripts run from gpt2/, beside the project's data/"}


def _settings_defaults(classes, pipeline):
    """{field: default} of the settings dataclasses a script's flags fill (ModelSpec's as built for
    `pipeline`, so that its per-pipeline defaults count; required fields left out)."""
    out = {}
    for cls in classes:
        if cls is ModelSpec:
            spec = ModelSpec(pipeline=pipeline)
            out.update({f.name: getattr(spec, f.name) for f in dataclasses.fields(ModelSpec)})
            continue
        for f in dataclasses.fields(cls):
            if f.default is not dataclasses.MISSING:
                out.setdefault(f.name, f.default)
            elif f.default_factory is not dataclasses.MISSING:
                out.setdefault(f.name, f.default_factory())
    return out


def _parsers():
    import bench
    from gpt2 import flags as gpt2_flags
    from gpt2.sonnets import SonnetSettings
    common = (Recipe, Regularizers, Runtime, RunSpec)
    return [("classifier", parsers.classifier_parser(), (ClassifierSettings, ModelSpec, *common), {}),
            ("multitask", parsers.multitask_parser(), (MultitaskSettings, MultitaskData, TaskLosses, ModelSpec,
                                                       *common), {}),
            ("pretrain", parsers.pretrain_parser(), (PretrainSettings, Runtime, RunSpec), {}),
            ("bench", bench.build_parser(), (BenchSettings, Regularizers, Runtime), {}),
            ("gpt2-classifier", gpt2_flags.classifier_parser(), (ClassifierSettings, ModelSpec, *common),
             GPT2_OWN),
            ("gpt2-sonnet", gpt2_flags.sonnet_parser(), (SonnetSettings, ModelSpec, *common), GPT2_OWN)]


def test_a_flag_and_the_settings_field_it_fills_default_alike():
    """Defaults live in one place: each flag whose destination is a field of the settings it becomes defaults as
    that field does (a test's `ModelSpec(pipeline=...)` tokenizes as the script would), but for the flags
    resolved later or a pipeline's own, each listed with its reason."""
    def same(a, b):
        return (tuple(a) if isinstance(a, list) else a) == (tuple(b) if isinstance(b, list) else b)
    wrong = []
    for name, parser, classes, own in _parsers():
        fields = _settings_defaults(classes, name if name != "bench" else "classifier")
        for action in parser._actions:
            dest = action.dest
            if dest in fields and dest not in RESOLVED and dest not in own and not same(action.default, fields[dest]):
                wrong.append(f"{name} --{dest}: flag {action.default!r}, settings {fields[dest]!r}")
    assert not wrong, "\n".join(wrong)


def test_parsing_a_scripts_flags_loads_no_benchmark():
    """The model shapes bench.py's --config names live in config.py: the flags' module does not import bench/."""
    import subprocess
    import sys
    from tests.course import ROOT
    out = subprocess.run([sys.executable, "-c", "import sys, minbert.flags.settings; "
                          "print(sorted(m for m in sys.modules if m.startswith('minbert.bench')))"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
