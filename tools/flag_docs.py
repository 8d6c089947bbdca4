"""docs/flags.md, generated from the scripts' own parsers so that it cannot go stale.

    python tools/flag_docs.py            # rewrite docs/flags.md
    python tools/flag_docs.py --check    # exit 1 if docs/flags.md differs from what the parsers say

tests/tools/test_flag_docs.py fails when the page and the parsers disagree.
"""
import argparse
import importlib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if not __package__:  # run as a file (python tools/NAME.py): the project folder first, not tools/
    sys.path.insert(0, str(ROOT))

PAGE = ROOT / "docs" / "flags.md"
# (script, module holding its parser, the parser's builder), in the order a user meets them.
SCRIPTS = [("classifier.py", "minbert.flags.parsers", "classifier_parser"),
           ("multitask_classifier.py", "minbert.flags.parsers", "multitask_parser"),
           ("pretrain.py", "minbert.flags.parsers", "pretrain_parser"), ("sweep.py", "sweep", "build_parser"),
           ("ensemble.py", "ensemble", "build_parser"), ("report.py", "report", "build_parser"),
           ("bench.py", "bench", "build_parser"), ("prepare_submit.py", "prepare_submit", "build_parser"),
           ("evaluation.py", "evaluation", "build_parser"),
           ("sanity_check.py", "sanity_check", "build_parser"),
           ("datasets.py", "datasets", "build_parser"),
           ("tools/convert_checkpoint.py", "tools.convert_checkpoint", "build_parser"),
           # Build GPT-2's scripts (run from gpt2/)
           ("gpt2/classifier.py", "gpt2.flags", "classifier_parser"),
           ("gpt2/paraphrase_detection.py", "gpt2.flags", "paraphrase_parser"),
           ("gpt2/sonnet_generation.py", "gpt2.flags", "sonnet_parser"),
           ("gpt2/sanity_check.py", "gpt2.sanity_check", "build_parser"),
           ("gpt2/prepare_submit.py", "gpt2.prepare_submit", "build_parser"),
           ("gpt2/datasets.py", "gpt2.datasets", "build_parser")]
# Earlier spellings, still accepted and hidden from --help.
ALIASES = {**{s: "`--checkpoint_dir DIR` is `--run_dir DIR`." for s in (
               "classifier.py", "gpt2/classifier.py", "gpt2/paraphrase_detection.py",
                                                                        "gpt2/sonnet_generation.py")},
           "multitask_classifier.py": "`--checkpoint PATH` is `--run_dir` PATH's folder, with the best "
                                      "checkpoint saved as PATH itself."}


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def _listed(action):
    """The values a flag's metavar lists ({false,true,never}): those its type reads (minbert/flags/types.py)."""
    m = action.metavar
    return m[1:-1].split(",") if isinstance(m, str) and m.startswith("{") and m.endswith("}") else []


def _default(action):
    """The default as it is typed: a listed value by the spelling its type reads as it (false, not Python's False),
    a list given as one argument joined by commas as its type splits it, one of several arguments by spaces."""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return "not given"
    d = action.default
    if d is None or d == argparse.SUPPRESS:
        return ""
    spelled = [s for s in _listed(action) if action.type is not None and action.type(s) == d]
    if spelled:
        return spelled[0]
    if isinstance(d, (list, tuple)):
        return (" " if action.nargs is not None else ",").join(str(x) for x in d)
    return str(d)


def _values(action):
    """What a flag takes: its choices or listed values, how many arguments, or what its type reads. A checked type
    of minbert/flags/types.py says that in words; one named like a function (fold_spec) says nothing to a user, so
    its metavar (I/K) does."""
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
        return "a switch"
    if action.choices:
        return ", ".join(str(c) for c in action.choices)
    if _listed(action):
        return ", ".join(_listed(action))
    if action.nargs in ("+", "*") or isinstance(action.nargs, int):
        if action.nargs not in ("+", "*"):
            return f"{action.nargs} value(s)"
        return "one or more" if action.nargs == "+" else "any number"
    kind = getattr(action.type, "__name__", None)
    if kind is None or kind in ("str", "<lambda>"):
        return ""
    if kind.isidentifier() and kind not in ("int", "float"):
        return action.metavar if isinstance(action.metavar, str) else ""
    return kind


def render():
    lines = ["# Flags", "",
             "Every script's command-line flags with their defaults, generated from the parsers by `python "
             "tools/flag_docs.py` (a test fails when this page and the parsers disagree). A flag given "
             "explicitly always wins over a default; `--recipe handout` changes some defaults of the two "
             "pipelines and of the GPT-2 training scripts (see the training recipe in RESULTS.md).", ""]
    for script, module, builder in SCRIPTS:
        parser = getattr(importlib.import_module(module), builder)()
        lines += [f"## {script}", ""]
        for group in parser._action_groups:
            actions = [a for a in group._group_actions if a.help != argparse.SUPPRESS
                       and not isinstance(a, argparse._HelpAction)]
            if not actions:
                continue
            title = {"options": "options", "optional "
                                           "arguments": "options", "positional arguments": "arguments"}.get(
                group.title, group.title)
            lines += [f"{title}:", "", "| flag | default | values | what it does |", "|---|---|---|---|"]
            for a in actions:
                name = ", ".join(f"`{s}`" for s in a.option_strings) or f"`{a.metavar or a.dest}`"
                help_text = (a.help or "").replace("%%", "%")
                lines.append(f"| {name} | {_cell(_default(a))} | {_cell(_values(a))} | {_cell(help_text)} |")
            lines.append("")
        if script in ALIASES:
            lines += [f"Earlier spelling, still accepted: {ALIASES[script]}", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    text = render()
    if args.check:
        if not PAGE.is_file() or PAGE.read_text() != text:
            sys.exit(f"{PAGE} differs from the parsers: run python tools/flag_docs.py")
        print(f"{PAGE} matches the parsers")
        return
    PAGE.write_text(text)
    print(f"wrote {PAGE}")


if __name__ == "__main__":
    main()
