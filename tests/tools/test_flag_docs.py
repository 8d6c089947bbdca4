"""tools/flag_docs.py: docs/flags.md is what the parsers say, on every machine, and every default it gives is a
spelling the flag's parser reads as that default; README's "What the defaults run" is what Part 1's and Part 2's
parsers and the table of defaults say."""
import argparse
import importlib
import re

import pytest

from minbert.cli import MinbertError
from minbert.flag import P1, P2
from minbert.flags import defaults
from tests.course import ROOT
from tools import flag_docs


def test_flags_page_equals_the_parsers(monkeypatch):
    # The page is the same on every machine: no default may come from the environment.
    for var in ("MINBERT_DATA", "MINBERT_CACHE", "MINBERT_HF_ENDPOINT", "HF_ENDPOINT"):
        monkeypatch.setenv(var, "/somewhere/else")
    assert (ROOT / "docs" / "flags.md").read_text() == flag_docs.render(), "run python tools/flag_docs.py"


def test_every_gpt2_script_has_its_section():
    """README says every flag is on the page: each script of gpt2/ (a file run as __main__) has its section, from the
    parser that script parses with."""
    scripts = sorted(f"gpt2/{p.name}" for p in (ROOT / "gpt2").glob("*.py") if "__main__" in p.read_text())
    assert len(scripts) == 6
    listed = {script for script, _, _ in flag_docs.SCRIPTS}
    assert [s for s in scripts if s not in listed] == []
    page = (ROOT / "docs" / "flags.md").read_text()
    assert all(f"\n## {s}\n" in page for s in scripts)
    assert "| `--para_dev_out` |" in page and "| `--temperature` | 1.2 |" in page


def _documented_defaults():
    """{script: {flag: its default as docs/flags.md writes it}}, read from the page's tables."""
    out = {}
    for section in (ROOT / "docs" / "flags.md").read_text().split("\n## ")[1:]:
        script, _, body = section.partition("\n")
        rows = (re.split(r"(?<!\\)\|", line)[1:-1] for line in body.splitlines() if line.startswith("| `"))
        out[script] = {re.match(r" `([^`]+)`", name).group(1): default.strip().replace("\\|", "|")
                       for name, default, *_ in rows}
    return out


def _wrong_defaults(pages):
    """[(script, flag, documented default)] of the flags whose default on `pages` (as _documented_defaults reads
    them), typed after the flag, does not parse to the value the flag has when it is left out, or is refused.
    Each script's required arguments are made optional, so that one flag alone parses."""
    wrong = []
    for script, module, builder in flag_docs.SCRIPTS:
        documented = pages[script]
        for action in getattr(importlib.import_module(module), builder)()._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
                continue  # an earlier spelling or --help: not on the page
            if not action.option_strings:  # an argument (a run's folder, a checkpoint): none has a default
                assert documented[action.metavar or action.dest] == "" and not action.default, (script, action.dest)
                continue
            flag = action.option_strings[0]
            text = documented[flag]
            if action.nargs == 0:  # a switch: its default is its absence, which the page says as such
                assert text == "not given", (script, flag, text)
                continue
            if text == "":
                # No default to type: None stands for one worked out at run time from other flags, the machine
                # or the checkpoint (--lr, --pad_multiple, --steps_per_epoch), or for nothing given (--run_name,
                # --extra_task); the page must not hide a real one.
                assert action.default in (None, "", [], ()), (script, flag, action.default)
                continue
            parser = getattr(importlib.import_module(module), builder)()
            for a in parser._actions:
                a.required = False
            words = text.split(" ") if action.nargs not in (None, "?") else [text]
            try:
                if getattr(parser.parse_args([flag, *words]), action.dest) == getattr(parser.parse_args([]),
                                                                                      action.dest):
                    continue
            except MinbertError:
                pass
            wrong.append((script, flag, text))
    return wrong


def test_every_documented_default_typed_on_the_command_line_is_the_default():
    """For every flag of every script on the page, its documented default, typed after the flag, parses to the
    value the flag has when it is left out: the page never gives a spelling the parser refuses or reads as
    another value."""
    pages = _documented_defaults()
    assert sum(text not in ("", "not given") for flags in pages.values() for text in flags.values()) > 200
    assert _wrong_defaults(pages) == []


def test_a_default_the_parser_refuses_or_reads_otherwise_is_caught():
    """The check above on the page as it was: Python's `False` for --early_stopping (which takes false, true or
    never) and `query value` for --lora_targets (one comma-separated argument)."""
    pages = _documented_defaults()
    pages["gpt2/sonnet_generation.py"]["--early_stopping"] = "False"
    pages["multitask_classifier.py"]["--lora_targets"] = "query value"
    assert _wrong_defaults(pages) == [("multitask_classifier.py", "--lora_targets", "query value"),
                                      ("gpt2/sonnet_generation.py", "--early_stopping", "False")]


def test_the_readmes_defaults_table_is_what_the_parsers_and_the_table_of_defaults_say(monkeypatch):
    for var in ("MINBERT_DATA", "MINBERT_CACHE", "MINBERT_HF_ENDPOINT", "HF_ENDPOINT"):
        monkeypatch.setenv(var, "/somewhere/else")
    readme = (ROOT / "README.md").read_text()
    assert readme == flag_docs.readme(readme), "run python tools/flag_docs.py"
    table = readme.split(flag_docs.BEGIN)[1].split(flag_docs.END)[0]
    for script in (P1, P2):  # every learning-rate row the script's default recipe reads, with its source
        for r in defaults.RULES:
            if r.setting == "lr" and script in r.scripts and r.recipe is None and r.optimizer is None:
                assert f"{defaults.rate(r.value)}" in table and defaults.source_words(r, link=True) in table
    rdrop = defaults.rule("rdrop_weight", P2)
    assert f"`--rdrop_weight {rdrop.value:g}` ({defaults.source_words(rdrop, link=True)})" in table


def test_a_readme_without_its_tables_lines_is_refused():
    with pytest.raises(SystemExit, match="lacks the lines around its defaults' table"):
        flag_docs.readme("# minbert\n\nno table here\n")
