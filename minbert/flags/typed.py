"""Which flags the user typed: argparse's result together with the set of flags given on the command line
(not left at their defaults), and the refusal of a typed flag that, as given, would change nothing. Free of
torch, so that a command that trains nothing (report.py) parses its flags without loading it."""
import argparse
import sys

from minbert.cli import MinbertError, flag_spelling


class Flags(argparse.Namespace):
    """What a script's parser parsed, as argparse gives it, and `typed`: the destinations of the flags given
    on the command line rather than left at their defaults (a slot, so not among vars(flags))."""
    __slots__ = ("typed",)


def given_flags(parser, argv):
    """The destinations of the flags actually typed in `argv` (not those left at their defaults, nor the ones
    set_defaults fills in: --recipe handout's, the hidden checkpoint_name)."""
    saved, saved_defaults = {a.dest: a.default for a in parser._actions}, parser._defaults
    try:
        for a in parser._actions:
            a.default = argparse.SUPPRESS
        parser._defaults = {}
        return set(vars(parser.parse_args(list(argv))))
    finally:
        parser._defaults = saved_defaults
        for a in parser._actions:
            a.default = saved[a.dest]


def parse_flags(ap, argv=None, handout=None):
    """The flags of `argv` (default sys.argv) as Flags, with the set typed; with `handout` ({dest: value}: the
    pipeline's handout defaults, flags/defaults.py), `--recipe handout` puts them in force (a typed flag still
    wins)."""
    given = list(sys.argv[1:] if argv is None else argv)
    if handout is not None and ("--recipe=handout" in given or any(
            a == "--recipe" and b == "handout" for a, b in zip(given, given[1:]))):
        ap.set_defaults(**handout)
    flags = ap.parse_args(given, Flags())
    flags.typed = given_flags(ap, given)
    return flags


def check_idle_flags(values, typed, rules):
    """Refuse, in one line, the first typed flag that `rules` ({dest: (acts(values, typed), why)}) say this
    configuration ignores."""
    for dest in sorted(typed):
        if dest in rules and not rules[dest][0](values, typed):
            raise MinbertError(f"{flag_spelling(dest)} {rules[dest][1]}: as given it would change nothing, "
                               "so it is refused rather than ignored (drop it, or add what it needs)")
