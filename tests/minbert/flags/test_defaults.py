"""flags/defaults.py: the recipe measured best against the handout's plain values one flag away, the learning
rate by what trains, the checkpoint's width and the optimizer, and --max_length within the position embeddings."""
import dataclasses

import pytest
import torch

import classifier
import multitask_classifier as mt
from minbert.flags.defaults import FULL_MODEL_LR, WIDE_LR, resolve_lr
from minbert.flags.settings import classifier_settings, multitask_settings
from tests.processes import one_line_error, run_main


def test_max_length_beyond_the_position_embeddings_is_refused_at_start(tmp_path, course_data, tiny_model):
    for script in ("classifier.py", "multitask_classifier.py"):
        out = run_main(script, "--pretrained", str(tiny_model), "--data_dir", str(course_data), "--max_length", "600",
                       cwd=tmp_path)
        one_line_error(out, r"--max_length 600: .*tiny-bert has 512 position embeddings, so at most --max_length 512")
        assert not (tmp_path / "runs").exists()  # refused before anything was made


def _part1(tiny_model, *flags):
    return classifier_settings(classifier.get_args(["--pretrained", str(tiny_model), *flags]), log=lambda *_: None)


def _part2(tiny_model, *flags):
    argv = ["--pretrained", str(tiny_model), *flags]
    return multitask_settings(mt.get_args(argv), log=lambda *_: None)


def test_handout_recipe_is_one_flag_away(tiny_model):
    best, plain = _part2(tiny_model), _part2(tiny_model, "--recipe", "handout")
    assert (best.model.fine_tune_mode, best.data.batch_size, best.recipe.lr, best.model.dropout) == \
        ("full-model", 32, 1e-4, (0.1,) * 3)
    assert (best.recipe.scheduler, best.recipe.warmup_ratio, best.recipe.max_grad_norm) == ("linear", 0.1, 0.0)
    assert (best.regularizers.rdrop_weight, best.regularizers.smart_weight,
            best.regularizers.smart_bregman_weight) == (2.0, 0.0, 0.0)  # R-Drop
    assert (plain.model.fine_tune_mode, plain.data.batch_size, plain.recipe.lr, plain.model.dropout) == \
        ("last-linear-layer", 8, 1e-5, (0.3,) * 3)
    assert (plain.recipe.scheduler, plain.recipe.warmup_ratio, plain.recipe.max_grad_norm,
            plain.regularizers.smart_weight, plain.regularizers.rdrop_weight) == ("constant", 0.0, 0.0, 0.0, 0.0)
    assert _part2(tiny_model, "--recipe=handout", "--lr", "3e-5").recipe.lr == 3e-5  # explicit flags win
    p1 = _part1(tiny_model, "--fine-tune-mode", "full-model")
    h1 = _part1(tiny_model, "--fine-tune-mode", "full-model", "--recipe", "handout")
    assert p1.recipe.lr == FULL_MODEL_LR["best"] and (p1.recipe.scheduler, p1.recipe.max_grad_norm) == ("linear", 0.0)
    assert (p1.regularizers.smart_weight, p1.regularizers.rdrop_weight) == (0.0, 0.0)  # none measured above baseline
    llr = _part1(tiny_model)  # last-linear-layer trains on cached features: no regulariser
    assert (llr.regularizers.smart_weight, llr.regularizers.rdrop_weight) == (0.0, 0.0)
    assert h1.recipe.lr == 1e-5 and (h1.recipe.scheduler, h1.recipe.warmup_ratio, h1.recipe.max_grad_norm,
                                     h1.regularizers.smart_weight) == ("constant", 0.0, 0.0, 0.0)


def test_default_lr_follows_the_checkpoints_width():
    """MiniLM's measured 1e-4 for narrow checkpoints; the BERT paper's range from bert-base's 768 up."""
    lr, why = resolve_lr(None, "full-model", "adamw", 384)
    assert lr == 1e-4 and "384 < 768: the best measured" in why
    lr, why = resolve_lr(None, "full-model", "adamw", 768)
    assert lr == WIDE_LR and "768 >= 768" in why
    assert resolve_lr(None, "lora", "adamw", 768)[0] == 1e-3  # only new weights train
    assert resolve_lr(None, "last-linear-layer", "adamw", 768)[0] == 1e-3
    assert resolve_lr(7e-5, "full-model", "adamw", 768) == (7e-5, "lr 7e-05")


def test_a_modes_default_rate_and_whether_its_backbone_is_frozen_are_two_facts(monkeypatch):
    """The new weights' rate follows `new_weights_lr`; the start line says "only new weights train" only where
    `frozen_backbone` holds: a mode training its backbone at the heads' rate is not described as frozen."""
    from minbert.finetuning import modes
    mixed = dataclasses.replace(modes.MODES["full-model"], new_weights_lr=True)
    monkeypatch.setitem(modes.MODES, "mixed", mixed)
    lr, why = resolve_lr(None, "mixed", "adamw", 384)
    assert lr == modes.ADAPTER_LR and "only new weights" not in why and "--fine-tune-mode mixed" in why
    lr, why = resolve_lr(None, "lora", "adamw", 384)
    assert lr == modes.ADAPTER_LR and "only new weights train" in why


@pytest.mark.parametrize("script", ["classifier", "multitask", "gpt2-classifier", "gpt2-paraphrase"])
def test_the_lr_help_says_the_rule_resolve_lr_applies(script):
    """Every rate the rule gives a mode the script takes, and each optimizer's factor, is in --lr's help."""
    from minbert.flags import parsers
    help_ = next(a.help for a in parsers.parser(script)._actions if a.dest == "lr")
    modes = next(a.choices for a in parsers.parser(script)._actions if a.dest == "fine_tune_mode")
    gpt2 = script.startswith("gpt2")
    full = (1e-5, "") if gpt2 else None
    for mode in modes:
        for width in (384, 768):
            lr = resolve_lr(None, mode, "adamw", width, full)[0]
            assert f"{lr:.0e}".replace("e-0", "e-") in help_, (mode, width, help_)
        if mode != "full-model":
            assert mode in help_.split("(only new weights train)")[0]
    assert "lion takes a third of AdamW's" in help_ and "lamb takes five times AdamW's" in help_


@pytest.mark.parametrize("name, lr, reason", [("lion", 1e-4 / 3, "Lion: a third of AdamW's"),
                                              ("lamb", 5e-4, "LAMB: five times AdamW's")])
def test_lion_and_lamb_default_to_their_own_rates(tiny_model, name, lr, reason):
    recipe = _part2(tiny_model, "--optimizer", name).recipe
    assert recipe.lr == pytest.approx(lr) and recipe.lr_why.startswith(f"lr {recipe.lr:g} ({reason}, whose default")


def test_the_training_step_is_recorded_on_a_gpu_unless_no_record_step_or_something_needs_it_eager():
    """--use_gpu records the step (measured correct and faster there); --no_record_step runs it eagerly, and the
    start line names each reason it cannot be recorded, read from the flags through the run's Recipe."""
    from minbert.flags.defaults import resolve_record_step
    from minbert.flags.settings import recipe

    def resolve(flags, device, amp, world, eager=None):  # the flags as settings.py turns them into a Recipe
        return resolve_record_step(flags, recipe(flags, 1e-3, ""), device, amp, world, eager)
    cuda, plain = torch.device("cuda"), {"record_step": True, "optimizer": "adamw", "grad_accum": 1}
    assert resolve(plain, torch.device("cpu"), "none", 1) == (
        False, "eager (recording the step as CUDA graphs needs a CUDA GPU; cpu runs it as it comes)")
    on, why = resolve(plain, cuda, "bf16", 1)
    assert on and why.startswith("recorded (a GPU's default: one CUDA graph per batch shape")
    assert resolve({"optimizer": "adamw"}, cuda, "bf16", 1)[0]  # the flag not given: recorded
    assert resolve({**plain, "compile": True}, cuda, "bf16", 1)[0]  # Inductor's kernels, recorded
    assert resolve({**plain, "record_step": False}, cuda, "bf16", 1) == (False, "eager (--no_record_step)")
    for change, amp, world, reason in (({"grad_accum": 2}, "bf16", 1, "--grad_accum"), ({}, "fp16", 1, "fp16"),
                                       ({}, "bf16", 2, "2 processes"), ({"pcgrad": True}, "bf16", 1, "--pcgrad"),
                                       ({"gradvac": True}, "bf16", 1, "--gradvac"),
                                       ({"sampler": "all"}, "bf16", 1, "--sampler all"),
                                       ({"gradual_unfreeze": 2}, "bf16", 1, "--gradual_unfreeze"),
                                       ({"optimizer": "lion"}, "bf16", 1, "--optimizer lion")):
        on, why = resolve({**plain, **change}, cuda, amp, world)
        assert not on and why.startswith("eager (the recorded step, a GPU's default, cannot take ") and reason in why
    on, why = resolve(plain, cuda, "bf16", 1, eager="the masked-LM head")
    assert not on and "the masked-LM head" in why


def test_the_trainer_refuses_in_one_line_what_it_cannot_record():
    from minbert.objectives.losses import ClassificationLoss
    from minbert.specs import Recipe, Runtime
    from minbert.training.trainer import Trainer
    from optimizer import AdamW
    from utils import MinbertError
    model = torch.nn.Linear(2, 2)
    for recipe, amp, words in ((Recipe(lr=1e-3, grad_accum=2), "none", "--grad_accum 2"),
                               (Recipe(lr=1e-3), "fp16", "fp16")):
        with pytest.raises(MinbertError, match=f"cannot take {words}.*: run it with --no_record_step"):
            Trainer(model, ClassificationLoss(), AdamW(model.parameters()), recipe,
                    Runtime(amp=amp, record_step=True))
