"""flags/recipe_rows.py: the training recipe's flags: the regularisers' defaults follow the pipeline (their rows in
the table of defaults, each source in the help), --recipe's help lists what --recipe handout puts in force, and
--optimizer's names each optimizer's rate with its source."""
from minbert.cli import flag_spelling
from minbert.flag import BENCH, G1, GS, P1, P2, TRAINING
from minbert.flags import defaults, parsers
from minbert.flags.typed import parse_flags


def _action(script, dest):
    return next(a for a in parsers.parser(script)._actions if a.dest == dest)


def test_the_regularisers_default_to_the_pipelines_recipe():
    part2, part1, bench = (parsers.parser(s).parse_args([]) for s in ("multitask", "classifier", "bench"))
    p2 = defaults.rule("rdrop_weight", P2).value  # (the table's row: a changed default changes no test)
    assert part2.rdrop_weight == p2 and bench.rdrop_weight == p2  # bench.py times Part 2's default step
    assert part1.rdrop_weight is None  # resolved once the fine-tune mode is known (settings.py)
    assert parsers.parser("gpt2-classifier").parse_args([]).rdrop_weight == 0.0
    for script in (P2, BENCH):
        r = defaults.rule("rdrop_weight", script)
        assert _action(script, "rdrop_weight").help.endswith(
            f"(0: off; default {r.value:g}: {defaults.source_words(r)})")
    whole = defaults.rule("rdrop_weight", P1, mode="full-model")
    assert f"for full-model, {defaults.source_words(whole)}" in _action(P1, "rdrop_weight").help
    assert _action(G1, "rdrop_weight").help.endswith("(0: off; default 0)")  # no row for Build GPT-2


def test_the_recipes_help_lists_what_recipe_handout_puts_in_force():
    for script in sorted(TRAINING):
        help_ = _action(script, "recipe").help
        args = parse_flags(parsers.parser(script), ["--recipe", "handout"], defaults.handout(script))
        for r in defaults.handout_rows(script):
            assert f"{flag_spelling(r.setting)} {defaults.shown(r, r.value)}" in help_, (script, r.setting)
            assert getattr(args, r.setting) == r.value
    assert "--lr " in _action(P2, "recipe").help and "--lr" not in _action(GS, "recipe").help  # Part 1's: by mode


def test_the_optimizers_help_names_each_ones_rate_and_source():
    for script in sorted(TRAINING):
        help_ = _action(script, "optimizer").help
        for name in ("lion", "lamb"):
            r = defaults.factor(name, script)
            assert f"--optimizer {name} takes {defaults.times(r.value)} ({defaults.source_words(r)})" in help_
