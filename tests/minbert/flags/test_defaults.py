"""flags/defaults.py: the table of defaults that are decisions: the recipe against the handout's plain values one
flag away, the learning rate by what trains, the checkpoint's width and the optimizer, each row's source true
(a measured value in the RESULTS.md section it names, a paper's within its range, no value written into a
reason), a default changed in its row alone reaching the resolver, --help, the start line and the docs; and
--max_length within the position embeddings."""
import dataclasses
import re

import pytest
import torch

import classifier
import multitask_classifier as mt
from minbert.flag import BENCH, BERT, G1, P1, P2, PRE, TRAINING
from minbert.flags import defaults, parsers, table
from minbert.flags.defaults import RULES, Chosen, Handout, Measured, Paper, resolve_lr, rule
from minbert.flags.settings import classifier_settings, multitask_settings
from tests.course import ROOT
from tests.processes import one_line_error, run_main
from tools import flag_docs


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
    narrow = rule("lr", P2, mode="full-model", hidden=32).value  # the tiny checkpoint's hidden size: 32
    assert (best.model.fine_tune_mode, best.data.batch_size, best.recipe.lr, best.model.dropout) == \
        ("full-model", 32, narrow, (0.1,) * 3)
    assert (best.recipe.scheduler, best.recipe.warmup_ratio, best.recipe.max_grad_norm) == ("linear", 0.1, 0.0)
    assert (best.regularizers.rdrop_weight, best.regularizers.smart_weight,
            best.regularizers.smart_bregman_weight) == (rule("rdrop_weight", P2).value, 0.0, 0.0)  # its row's
    assert (plain.model.fine_tune_mode, plain.data.batch_size, plain.recipe.lr, plain.model.dropout) == \
        ("last-linear-layer", 8, 1e-5, (0.3,) * 3)
    assert (plain.recipe.scheduler, plain.recipe.warmup_ratio, plain.recipe.max_grad_norm,
            plain.regularizers.smart_weight, plain.regularizers.rdrop_weight) == ("constant", 0.0, 0.0, 0.0, 0.0)
    assert _part2(tiny_model, "--recipe=handout", "--lr", "3e-5").recipe.lr == 3e-5  # explicit flags win
    p1 = _part1(tiny_model, "--fine-tune-mode", "full-model")
    h1 = _part1(tiny_model, "--fine-tune-mode", "full-model", "--recipe", "handout")
    assert p1.recipe.lr == rule("lr", P1, "best", "full-model", 32).value  # the tiny checkpoint's hidden size: 32
    assert (p1.recipe.scheduler, p1.recipe.max_grad_norm) == ("linear", 0.0)
    assert (p1.regularizers.smart_weight, p1.regularizers.rdrop_weight) == (0.0, 0.0)  # none measured above baseline
    llr = _part1(tiny_model)  # last-linear-layer trains on cached features: no regulariser
    assert (llr.regularizers.smart_weight, llr.regularizers.rdrop_weight) == (0.0, 0.0)
    assert h1.recipe.lr == 1e-5 and (h1.recipe.scheduler, h1.recipe.warmup_ratio, h1.recipe.max_grad_norm,
                                     h1.regularizers.smart_weight) == ("constant", 0.0, 0.0, 0.0)


def test_default_lr_follows_the_checkpoints_width():
    """MiniLM's measured 1e-4 for narrow checkpoints; the BERT paper's range from bert-base's 768 up."""
    narrow, wide = rule("lr", P2, mode="full-model", hidden=384), rule("lr", P2, mode="full-model", hidden=768)
    lr, why = resolve_lr(None, P2, "full-model", "adamw", 384)
    assert lr == narrow.value and "384 < 768; source: " + defaults.source_words(narrow) in why
    lr, why = resolve_lr(None, P2, "full-model", "adamw", 768)
    assert lr == wide.value and "768 >= 768; source: " + defaults.source_words(wide) in why
    assert isinstance(narrow.source, Measured) and isinstance(wide.source, Paper)
    assert resolve_lr(None, P2, "lora", "adamw", 768)[0] == 1e-3  # only new weights train
    assert resolve_lr(None, P2, "last-linear-layer", "adamw", 768)[0] == 1e-3
    assert resolve_lr(7e-5, P2, "full-model", "adamw", 768) == (7e-5, "lr 7e-05")


def test_a_modes_default_rate_and_whether_its_backbone_is_frozen_are_two_facts(monkeypatch):
    """The new weights' rate follows `new_weights_lr`; the start line says "only new weights train" only where
    `frozen_backbone` holds: a mode training its backbone at the heads' rate is not described as frozen."""
    from minbert.finetuning import modes
    mixed = dataclasses.replace(modes.MODES["full-model"], new_weights_lr=True)
    monkeypatch.setitem(modes.MODES, "mixed", mixed)
    new_weights = rule("lr", P2, mode="lora").value
    lr, why = resolve_lr(None, P2, "mixed", "adamw", 384)
    assert lr == new_weights and "only new weights" not in why and "--fine-tune-mode mixed" in why
    lr, why = resolve_lr(None, P2, "lora", "adamw", 384)
    assert lr == new_weights and "only new weights train" in why


@pytest.mark.parametrize("script", ["classifier", "multitask", "gpt2-classifier", "gpt2-paraphrase"])
def test_the_lr_help_says_the_rule_resolve_lr_applies(script):
    """Every rate the rule gives a mode the script takes, and each optimizer's factor, is in --lr's help."""
    from minbert.flags import parsers
    help_ = next(a.help for a in parsers.parser(script)._actions if a.dest == "lr")
    modes = next(a.choices for a in parsers.parser(script)._actions if a.dest == "fine_tune_mode")
    for mode in modes:
        for width in (384, 768):
            for recipe in ("best", "handout"):
                lr = resolve_lr(None, script, mode, "adamw", width, recipe)[0]
                assert defaults.rate(lr) in help_, (mode, width, recipe, help_)
        if mode != "full-model":
            assert mode in help_.split("(only new weights train")[0]
    for r in (defaults.factor("lion", script), defaults.factor("lamb", script)):  # each factor's words: its row's
        assert f"{r.optimizer} takes {defaults.times(r.value)} ({defaults.source_words(r)})" in help_


@pytest.mark.parametrize("name", ["lion", "lamb"])
def test_lion_and_lamb_default_to_their_own_rates(tiny_model, name):
    """Each optimizer's rate is its row's factor on AdamW's default, the start line saying so with both rows'
    sources."""
    recipe, scale = _part2(tiny_model, "--optimizer", name).recipe, defaults.factor(name, P2)
    adamw, words = rule("lr", P2, mode="full-model", hidden=32), defaults.times(scale.value)
    assert recipe.lr == pytest.approx(adamw.value * scale.value) and recipe.lr != adamw.value
    assert recipe.lr_why.startswith(f"lr {recipe.lr:g} (--optimizer {name}: {words}, source: "
                                    f"{defaults.source_words(scale)}; AdamW's lr {adamw.value:g} is the default ")
    assert recipe.lr_why.endswith(f"; source: {defaults.source_words(adamw)})")


# ----------------------------------------------------------------------------- each row's source

# The hidden size of each checkpoint a row was measured on (Measured.on).
WIDTH = {"all-minilm-l6-v2": 384}


def _sections():
    """{anchor: text} of RESULTS.md's sections: each heading's GitHub anchor (lower case, punctuation but hyphens
    dropped, spaces as hyphens; a title met again takes -1, -2, ...), its text running to the next heading of its
    level or above."""
    lines = (ROOT / "RESULTS.md").read_text().splitlines()
    heads = [(i, len(m.group(1)), m.group(2)) for i, line in enumerate(lines) if (m := re.match(r"(#+) (.*)", line))]
    sections, met = {}, {}
    for n, (i, level, title) in enumerate(heads):
        slug = re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-")
        anchor, met[slug] = (f"{slug}-{met[slug]}" if slug in met else slug), met.get(slug, 0) + 1
        end = next((j for j, deeper, _ in heads[n + 1:] if deeper <= level), len(lines))
        sections[anchor] = "\n".join(lines[i:end])
    return sections


def _shows(section, r):
    """Whether a RESULTS.md section writes row `r`'s value: a rate as people write it (1e-4), a factor as the rate
    it gave on the measured checkpoint's AdamW default (5e-4), another setting as its flag (--rdrop_weight 2); a
    term left off (a weight of 0) by its flag, which the section measured against none."""
    if r.optimizer is not None:
        adamw = rule("lr", P2, mode="full-model", hidden=WIDTH[r.source.on])
        written = defaults.rate(adamw.value * r.value)
    elif r.setting == "lr":
        written = defaults.rate(r.value)
    else:
        written = f"--{r.setting} {r.value:g}" if r.value else f"--{r.setting}"
    return re.search(rf"(?<![\w.-]){re.escape(written)}(?![\w.])", section) is not None


def test_a_measured_row_holds_the_value_the_results_section_it_names_shows():
    sections = _sections()
    measured = [r for r in RULES if isinstance(r.source, Measured)]
    assert len(measured) >= 5
    for r in measured:
        assert r.source.anchor in sections, f"RESULTS.md has no section #{r.source.anchor} ({r.setting})"
        assert _shows(sections[r.source.anchor], r), f"#{r.source.anchor} does not show {r.setting} {r.value}"
    wrong = dataclasses.replace(rule("lr", P2, mode="full-model", hidden=384), value=2e-4)
    assert not _shows(sections[wrong.source.anchor], wrong)  # a value the measurement did not make is caught


def test_a_papers_row_lies_within_the_range_it_cites_and_no_source_words_hold_a_value():
    """A paper's range bounds its row's value; the words written by hand (a handout, a citation, a choice) hold
    no value, so that only a row's fields say one."""
    papers = [r for r in RULES if isinstance(r.source, Paper) and r.source.span]
    assert {r.optimizer or r.setting for r in papers} >= {"lr", "lion"}
    for r in papers:
        low, high = r.source.span
        assert low - 1e-12 <= r.value <= high + 1e-12, (r.setting, r.value, r.source)
    value = re.compile(r"\d+(\.\d+)?e-?\d+|\b0\.\d+|\d%|\d+x\b")
    for r in RULES:
        s = r.source
        words = {Measured: lambda: s.anchor + s.on, Paper: lambda: s.citation, Handout: lambda: s.which,
                 Chosen: lambda: s.why}[type(s)]()
        assert not value.search(words), (r.setting, words)
    assert value.search("3e-5") and value.search("0.01") and not value.search("Devlin et al. 2019, appendix A.3")


@pytest.mark.parametrize("script", sorted(TRAINING | {PRE}))
def test_every_default_reason_names_its_rows_source_and_value(script):
    """Every learning rate resolve_lr gives by default, in every script, mode, width, recipe and optimizer, says
    its value and names the source of each row it read."""
    actions = {a.dest: a for a in parsers.parser(script)._actions}
    modes = actions["fine_tune_mode"].choices if "fine_tune_mode" in actions else ["full-model"]
    for mode in modes:
        for width in (384, 768) if script in BERT else (None,):
            for recipe in ("best", "handout"):
                for optimizer in ("adamw", "lion", "lamb"):
                    lr, why = resolve_lr(None, script, mode, optimizer, width, recipe)
                    base, scale = rule("lr", script, recipe, mode, width), defaults.factor(optimizer, script)
                    assert why.startswith(f"lr {lr:g} (") and f"source: {defaults.source_words(base)}" in why
                    assert lr == pytest.approx(base.value * (scale.value if scale else 1.0))
                    assert scale is None or f"source: {defaults.source_words(scale)}" in why
    with pytest.raises(ValueError, match="no learning-rate row .* holds for bench"):
        resolve_lr(None, BENCH, "full-model", "adamw", 384)


def test_every_row_sets_a_flag_its_scripts_take_or_imply():
    for r in RULES:
        for script in r.scripts:
            dests = {a.dest for a in parsers.parser(script)._actions} | set(parsers.defaults(script))
            assert r.setting in dests, (r.setting, script)


def test_a_default_changed_in_its_row_alone_reaches_the_resolver_help_start_line_and_docs(monkeypatch, tiny_model):
    """Part 2's full-model rate for narrow checkpoints, changed in its row and nowhere else (the flags' rows
    rebuilt, as an edit and a new process build them): the resolver, the start line's reason (Recipe.lr_why,
    which both pipelines print), --lr's help in Part 1 and 2, docs/flags.md and README's table say the new value
    with the row's source, and the old value nowhere."""
    narrow = rule("lr", P2, mode="full-model", hidden=384)
    changed = dataclasses.replace(narrow, value=2e-4, source=Measured("part-2-the-training-recipe"))
    monkeypatch.setattr(defaults, "RULES", tuple(changed if r is narrow else r for r in RULES))
    monkeypatch.setattr(table, "ROWS", table.all_rows())
    source, old = defaults.source_words(changed), f"{narrow.value:g}"
    lr, why = resolve_lr(None, P2, "full-model", "adamw", 384)
    assert (lr, why) == (2e-4, f"lr 0.0002 (default for the whole model on a checkpoint of hidden size 384 < 768; "
                               f"source: {source})")
    assert resolve_lr(None, P2, "full-model", "lamb", 384)[0] == pytest.approx(2e-4 * defaults.factor("lamb", P2).value)
    assert resolve_lr(None, P2, "full-model", "adamw", 768)[0] == rule("lr", P2, mode="full-model", hidden=768).value
    for settings in (_part2(tiny_model), _part1(tiny_model, "--fine-tune-mode", "full-model")):
        assert settings.recipe.lr == 2e-4 and settings.recipe.lr_why == why.replace("384", "32")
    said = f"2e-4 for full-model below hidden size 768 ({source})"
    for script in (P1, P2):
        help_ = next(a.help for a in parsers.parser(script)._actions if a.dest == "lr")
        assert said in help_ and defaults.rate(narrow.value) not in help_
    page = flag_docs.render()
    assert page.count(said) == 2 and defaults.rate(narrow.value) not in page.split("## pretrain.py")[0]
    readme = flag_docs.render_defaults()
    assert f"2e-4 for full-model below hidden size 768 ({defaults.source_words(changed, link=True)})" in readme
    assert defaults.rate(narrow.value) not in readme and old not in readme


def test_rates_and_factors_are_written_as_people_write_them():
    assert [defaults.rate(v) for v in (1e-3, 3e-5, 2.5e-5, 1e-5, 5e-4)] == ["1e-3", "3e-5", "2.5e-5", "1e-5", "5e-4"]
    assert [defaults.times(f) for f in (1 / 3, 5.0, 0.5, 0.4, 1.5)] == [
        "a third of AdamW's", "five times AdamW's", "half of AdamW's", "0.4 times AdamW's", "1.5 times AdamW's"]


def test_the_handout_rows_are_what_the_handout_recipe_puts_in_force():
    """--recipe handout's values in each script are its rows': Part 2's the handout's own (rate, fine-tune mode,
    batch size, dropout), every script's the plain training with no regulariser."""
    from minbert.objectives.regularizers import REGULARIZERS
    part2 = defaults.handout(P2)
    assert (part2["lr"], part2["fine_tune_mode"], part2["batch_size"], part2["hidden_dropout_prob"]) == (
        1e-5, "last-linear-layer", 8, 0.3)
    for script in TRAINING:
        plain = defaults.handout(script)
        assert (plain["scheduler"], plain["warmup_ratio"], plain["max_grad_norm"]) == ("constant", 0.0, 0.0)
        assert all(plain[r.weight] == 0.0 for r in REGULARIZERS.values() if script in BERT or not r.gpt2)
    assert "lr" not in defaults.handout(P1) and "lr" not in defaults.handout(G1)  # Part 1's: by the mode


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
