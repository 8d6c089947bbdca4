"""flags/table.py, the one list of the rows, and what parsers.py builds from it: one row per flag builds every
script's parser: Build GPT-2's scripts name the BERT-only flags they leave out, a row's default, rule and help
reach its scripts, a new flag is one row, and no flag is taken by an abbreviation."""
import dataclasses

import pytest

from minbert.flag import G1, GP, P1, P2, PRE, Flag
from minbert.flags import parsers, table
from tools import flag_docs
from utils import MinbertError


@pytest.mark.parametrize("script", ["gpt2-classifier", "gpt2-paraphrase", "gpt2-sonnet"])
def test_build_gpt2_names_the_bert_only_flags_it_leaves_out(script):
    """A row with `not_gpt2` is no flag of Build GPT-2's scripts; typed there, it is one line saying why."""
    bert_only = [r for r in table.ROWS if r.not_gpt2]
    assert {r.spelling for r in bert_only} >= {"--llrd", "--freeze_layers", "--no_fast_dropout", "--smart_weight"}
    for r in bert_only:
        with pytest.raises(MinbertError, match=rf"argument {r.spelling}: .*not available for GPT-2; drop it|"
                                               rf"{r.spelling} .*not available for GPT-2; drop it"):
            parsers.parser(script).parse_args([r.spelling] if r.kind in ("switch", "off") else [r.spelling, "1"])


def test_each_row_reaches_the_scripts_it_names_with_its_default_rule_and_help():
    """For every row and every script it names: the parser takes the flag with the row's default and help, and
    the row's rule (if any) is that script's rule for it; a script it does not name refuses the flag."""
    from minbert.flag import per
    for script in parsers.SCRIPTS | {"bench": None, "ensemble": None}:
        ap = parsers.parser(script)
        actions = {a.option_strings[0]: a for a in ap._actions if a.option_strings}
        rules = parsers.idle_rules(script)
        for r in table.ROWS:
            if script in r.scripts:
                a = actions[r.spelling]
                assert a.dest == r.dest and a.help == per(r.help, script), (script, r.spelling)
                if r.kind not in ("switch", "off") and r.action is None:
                    assert a.default == per(r.default, script), (script, r.spelling)
                assert rules.get(r.dest) == per(r.idle, script) or r.action is not None, (script, r.spelling)
            elif r.spelling not in actions:
                with pytest.raises(MinbertError):
                    ap.parse_args([r.spelling] if r.kind in ("switch", "off") else [r.spelling, "1"])


def test_no_flag_is_taken_by_an_abbreviation():
    """bench.py's --warmup typed to a pipeline is refused, not read as --warmup_ratio (argparse's abbreviations)."""
    with pytest.raises(MinbertError, match=r"^classifier.py: unrecognized arguments: --warmup \(did you mean "
                                           r"--warmup_ratio\?\)$"):
        parsers.parser("classifier").parse_args(["--warmup", "1"])
    assert parsers.parser("classifier").parse_args(["--warmup_ratio", "0.2"]).warmup_ratio == 0.2


def test_a_flag_a_script_implies_is_not_one_it_takes_and_reaches_its_settings_with_the_rows_default():
    """pretrain.py's recipe beyond its flags, the cloze task's adapters and datasets, GPT-2's prefix length (it has
    no prefix mode): each row's `implied` scripts get its default (parsers.defaults) and do not parse it."""
    implied = [r for r in table.ROWS if r.implied]
    assert {s for r in implied for s in r.implied} == {PRE, GP, G1}
    for r in implied:
        for script in r.implied:
            assert script not in (r.scripts or ())
            assert parsers.defaults(script)[r.dest] == parsers.per(r.default, script)
            assert r.dest not in vars(parsers.parser(script).parse_args([]))
    assert parsers.defaults(PRE)["scheduler"] == "linear" and parsers.defaults(GP)["datasets"] == ["quora"]


def test_every_row_is_spelled_as_messages_name_it():
    """The torch-free spelling every message uses (cli.flag_spelling) is the one each parser takes: a switch that
    turns something off is --no_DEST, the handout's hyphenated flag keeps its hyphens."""
    from minbert.cli import flag_spelling
    for r in table.ROWS:
        if r.name is None:  # (a row with a name of its own is an alias of one script's: --checkpoint_dir)
            assert r.spelling == flag_spelling(r.dest)
            if r.kind == "off":
                assert r.spelling == f"--no_{r.dest}"
    assert flag_spelling("tensorboard") == "--no_tensorboard" and flag_spelling("fine_tune_mode") == "--fine-tune-mode"


def test_a_new_flag_is_one_row_in_the_one_list(monkeypatch):
    """A row added to ROWS is parsed by the scripts it names (default, type, help), refused by the others, on
    docs/flags.md, and reaches a settings dataclass with a field of its name (settings.from_flags)."""
    from minbert.flags.settings import from_flags
    row = Flag("toy_knob", 3, "positive_int", "how far the toy knob turns", scripts=frozenset({P2}),
               group="training recipe")
    monkeypatch.setattr(table, "ROWS", [*table.ROWS, row])
    assert parsers.parser(P2).parse_args([]).toy_knob == 3
    assert parsers.parser(P2).parse_args(["--toy_knob", "5"]).toy_knob == 5
    with pytest.raises(MinbertError, match="--toy_knob: .*integer"):
        parsers.parser(P2).parse_args(["--toy_knob", "0"])
    with pytest.raises(MinbertError, match="unrecognized arguments: --toy_knob"):
        parsers.parser(P1).parse_args(["--toy_knob", "5"])
    assert "| `--toy_knob` | 3 | an integer >= 1 | how far the toy knob turns |" in flag_docs.render()
    Toy = dataclasses.make_dataclass("Toy", [("toy_knob", int, dataclasses.field(default=0))], frozen=True)
    assert from_flags(Toy, vars(parsers.parser(P2).parse_args(["--toy_knob", "7"]))).toy_knob == 7
