"""A flag as one row (Flag), declared once beside what it configures, a value that differs by script (Per), the
scripts rows name, and where a default that is a decision comes from (Measured, Paper, Handout, Chosen).
minbert/flags/table.py lists the training scripts' rows (model_rows.py, recipe_rows.py, runtime_rows.py), each
regulariser's module its own (objectives/), and the parsers, the settings, the rules and docs/flags.md are built
from them."""
from dataclasses import dataclass, fields
from typing import NamedTuple, Optional

from minbert.cli import flag_spelling

# The scripts that take the rows' flags, as a row's `scripts` and a Per name them: minBERT's classifier.py,
# multitask_classifier.py and pretrain.py, Build GPT-2's classifier.py, paraphrase_detection.py and
# sonnet_generation.py, bench.py, which times their step, and ensemble.py, which takes the speed flags that act
# where nothing trains.
P1, P2, PRE, BENCH, ENSEMBLE = "classifier", "multitask", "pretrain", "bench", "ensemble"
G1, GP, GS = "gpt2-classifier", "gpt2-paraphrase", "gpt2-sonnet"
GPT2 = frozenset({G1, GP, GS})
BERT = frozenset({P1, P2})           # minBERT's fine-tuning pipelines
TRAINING = BERT | GPT2
ALL = TRAINING | {PRE, BENCH}
INFERENCE = frozenset({ENSEMBLE})


# Where a default that is a decision comes from (minbert/flags/defaults.py's table; a regulariser's row): each is
# said in words built from its fields, and checked where it can be.

class Measured(NamedTuple):
    """Measured here: `anchor` names the RESULTS.md section that holds the measurement (a test finds the value
    there), `on` the checkpoint it was measured on."""
    anchor: str
    on: str = "all-minilm-l6-v2"


class Paper(NamedTuple):
    """From the literature: `citation`, and `span`, (low, high), where the paper gives a range (a test holds the
    value within it)."""
    citation: str
    span: Optional[tuple] = None


class Handout(NamedTuple):
    """The course's: `which` names the handout (and where in it), in words that hold no value."""
    which: str


class Chosen(NamedTuple):
    """Set by hand and not measured: `why`, in words that hold no value."""
    why: str


class Per(dict):
    """A flag's value that differs by script: {script: value}, and `other` for every script not named (a default,
    a help text, an argument group, a rule). Per(8, multitask=32) is 8 everywhere but in multitask_classifier.py."""

    def __init__(self, other=None, **by_script):
        super().__init__({k.replace("_", "-"): v for k, v in by_script.items()})
        self.other = other

    def of(self, script):
        return self.get(script, self.other)


def per(value, script):
    """`value` for `script`: a Per's entry, or the value itself."""
    return value.of(script) if isinstance(value, Per) else value


def default(cls, name):
    """A settings dataclass's default for `name`: the one place it is written, which a row reads."""
    return next(f.default for f in fields(cls) if f.name == name)


@dataclass(frozen=True)
class Flag:
    """One flag, declared once: every parser that takes it (minbert/flags/parsers.py builds them), the settings
    field of its name, the rule that refuses it where it would change nothing and docs/flags.md all read this
    row. Its destination and default (a Per where scripts differ); its checked type: a name in
    minbert/flags/types.py or such a function, "switch" for a flag that turns something on, "off" for
    --no_DEST that turns something off (spelled so in cli.SPELLED), a tuple of choices, None for text; its help;
    for the messages what it does ("shapes <the term>" unless said) and, when it acts only under another flag's
    value too, that condition: (its words, a test of the parsed flags). The rest say where it goes: `scripts`
    that take it (None: set by its table), `name` for a flag typed otherwise than cli.flag_spelling says (an
    alias of a script's own), its argument `group`, `nargs`, `metavar`, `idle` ((acts(values, typed), what it
    does) where a configuration would ignore it), `not_gpt2` (why Build GPT-2's scripts leave it out, a line for
    one typed there), `action` (an argparse Action of its own) and `const` (the value of a flag typed bare, with
    nargs="?"), and `implied`: the scripts that do not take it but whose settings need its default (and record
    it as the run's)."""
    dest: str
    default: object
    kind: object
    help: object
    what: Optional[str] = None
    when: Optional[tuple] = None
    scripts: Optional[frozenset] = None
    name: Optional[str] = None
    group: object = None
    nargs: object = None
    metavar: object = None
    idle: object = None
    not_gpt2: Optional[str] = None
    action: object = None
    const: object = None
    implied: frozenset = frozenset()

    @property
    def spelling(self):
        return self.name or flag_spelling(self.dest)
