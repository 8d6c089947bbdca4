"""sweep.py's search space: `--space FLAG=SPEC` items parsed and checked against the pipeline's own parser
before anything trains, turned into Optuna suggestions and back into command-line flags."""
import math

from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from minbert.cli import MinbertError
from minbert.flags.parsers import classifier_parser, multitask_parser

PARSERS = {"classifier": classifier_parser, "multitask": multitask_parser}
# Flags the sweep sets for every trial: where its files go, and its seed.
RESERVED = ["--seed", "--run_name", "--run_dir", "--checkpoint_dir", "--checkpoint", "--predictions_dir",
            "--results",
            "--resume", "--eval_only"] + [f"--{p}_{s}_out" for p in ("sst", "para", "sts") for s in ("dev",
                                                                                                     "test")]


def parse_space(items):
    """['lr=log:1e-5:2e-4', 'hidden_dropout_prob=0.1,0.3'] -> {flag: (kind, values)}; a bad item is one line."""
    space, items_of = {}, {}
    for item in items:
        if "=" not in item:
            raise MinbertError(f"--space {item!r}: expected FLAG=SPEC, e.g. "
                               "lr=log:1e-5:2e-4 or hidden_dropout_prob=0.1,0.3")
        flag, spec = item.split("=", 1)
        flag = flag.lstrip("-")
        if not flag.strip() or flag != flag.strip():
            raise MinbertError(f"--space {item!r}: {'no' if not flag.strip() else 'spaces around the'} flag name "
                               "before '='; expected FLAG=SPEC, e.g. lr=log:1e-5:2e-4")
        if flag_name(flag) in items_of:  # argparse would let the last one win: a sweep the user did not mean
            raise MinbertError(f"--space names {flag_name(flag)} twice ({items_of[flag_name(flag)]!r} and "
                               f"{item!r}): give each flag once, with all its values")
        items_of[flag_name(flag)] = item
        parts = spec.split(":")
        if parts[0] in ("log", "float", "int"):
            if len(parts) != 3:
                raise MinbertError(f"--space {item!r}: {parts[0]} needs "
                                   f"LO:HI, e.g. {flag}={parts[0]}:1e-5:1e-3")
            try:
                lo, hi = (float(p) for p in parts[1:])
            except ValueError:
                raise MinbertError(f"--space {item!r}: LO and HI must be numbers") from None
            if parts[0] == "int":
                if not (lo.is_integer() and hi.is_integer()):
                    raise MinbertError(f"--space {item!r}: int bounds must be whole numbers (an int range "
                                       "draws whole numbers), e.g. "
                                       f"{flag}=int:{math.floor(lo)}:{math.ceil(hi)}, or "
                                       f"{flag}=float:{parts[1]}:{parts[2]} "
                                       f"if {flag_name(flag)} takes fractions")
                lo, hi = int(lo), int(hi)
            if not lo < hi or (parts[0] == "log" and lo <= 0):
                raise MinbertError(f"--space {item!r}: "
                                   "need LO < HI" + (" and LO > 0" if parts[0] == "log" else ""))
            space[flag] = (parts[0], (lo, hi))
        else:
            choices = spec.split(",")
            if not spec.strip():
                raise MinbertError(f"--space {item!r}: no choices")
            if any(not c.strip() for c in choices):  # `lr=1e-4,`: a value left out, or a slip
                raise MinbertError(f"--space {item!r}: an empty choice between commas; give each value once, "
                                   f"e.g. {flag}={','.join(c for c in choices if c.strip()) or 'A,B'}")
            twice = next((c for i, c in enumerate(choices) if any(same_value(c, d) for d in choices[:i])), None)
            if twice is not None:  # a trial of it would run once and every repeat be skipped as a duplicate
                raise MinbertError(f"--space {item!r}: {twice.strip()} is given twice; give each value once")
            space[flag] = ("choice", choices)
    return space


def same_value(a, b):
    """Whether two choices typed for one flag are one value (1e-3 and 0.001 are)."""
    try:
        return float(a) == float(b)
    except ValueError:
        return a.strip() == b.strip()


def check_space_spelling(argv, own_flags):
    """Before argparse reads sweep.py's `argv`: a pipeline flag typed with its dashes (`--space
    --lr=1e-3,1e-4`) reads to argparse as a flag of sweep.py's, and its message ("--space: expected at least
    one argument") would not say what --space expects. `own_flags` are sweep.py's option strings."""
    for before, token in zip([None] + argv, argv):
        name = token.split("=", 1)[0]
        ours = any(f.startswith(name) for f in own_flags)  # argparse takes an unambiguous prefix
        if (before == "--space" and token.startswith("-")
                or token.startswith("--") and "=" in token and not ours):
            item = token.lstrip("-") if "=" in token else f"{token.lstrip('-')}=SPEC"
            raise MinbertError(f"{'--space ' if before == '--space' else ''}{token}: --space takes FLAG=SPEC "
                               f"items, the pipeline's flag without its dashes (--space {item}); a flag "
                               "fixed for every trial goes after -- instead")


def flag_name(flag):
    return "--fine-tune-mode" if flag in ("fine_tune_mode", "fine-tune-mode") else f"--{flag}"


def check_flags(pipeline, base, space):
    """Parse the fixed flags, and each value of the space on its own: an unknown flag or a value of the
    wrong type fails here, in one line, before anything trains. Whether values work together is each
    trial's own check (an incompatible trial fails alone)."""
    for reserved in RESERVED:
        seeds = " (seeds: --seeds)" if reserved == "--seed" else ""
        if any(flag_name(f) == reserved for f in space):
            raise MinbertError(f"--space {reserved[2:]}=...: {reserved} is set by the sweep for every "
                               f"trial{seeds}; search another flag")
        if any(t == reserved or t.startswith(reserved + "=") for t in base):
            raise MinbertError(f"{reserved} is set by the sweep for every trial{seeds}; drop it from the trial "
                               "flags after --")
    for flag in space:
        name = flag_name(flag)
        if any(tok == name or tok.startswith(name + "=") for tok in base):
            raise MinbertError(f"{name} is searched by --space and also fixed after --: drop one of the two "
                               "(each trial would give the flag twice)")
    parser = PARSERS[pipeline]()
    parser.parse_args(base)
    for flag, (kind, values) in space.items():
        action = parser._option_string_actions.get(flag_name(flag))
        switch = action is not None and action.nargs == 0
        if switch != (kind == "choice" and set(values) <= set(SWITCH)):
            raise MinbertError(f"--space {flag}={','.join(map(str, values))}: " + (
                f"{flag_name(flag)} is a switch (on or off): sweep it as {flag}=yes,no" if switch else
                f"{flag_name(flag)} takes a value, and yes/no sweep switches only"))
        for v in values:
            parser.parse_args(base + as_argv({flag: v}))
    if pipeline == "classifier":
        datasets = parser.parse_args(base).datasets
        if len(datasets) != 1:
            raise MinbertError("a classifier sweep scores one dataset: "
                               "pass --datasets sst (or cfimdb) after --")


def trial_flags(pipeline, argv):
    """The pipeline's flags as a trial given `argv` parses them (check_flags has checked they parse)."""
    return PARSERS[pipeline]().parse_args(argv)


def suggest(trial, space):
    values = {}
    for flag, (kind, vals) in space.items():
        if kind == "log":
            values[flag] = trial.suggest_float(flag, *vals, log=True)
        elif kind == "float":
            values[flag] = trial.suggest_float(flag, *vals)
        elif kind == "int":
            values[flag] = trial.suggest_int(flag, *vals)
        else:
            values[flag] = trial.suggest_categorical(flag, vals)
    return values


# A switch (--pals, --no_bucket) is swept as FLAG=yes,no: "yes" passes the flag, "no" leaves it out.
SWITCH = ("yes", "no")


def as_argv(values):
    """The command-line flags of one trial's values (check_flags made sure yes/no belong to switches)."""
    argv = []
    for flag, v in values.items():
        if v in SWITCH:
            argv += [flag_name(flag)] if v == "yes" else []
        else:
            argv += [flag_name(flag), f"{v:.4g}" if isinstance(v, float) else str(v)]
    return argv


def distributions(space):
    """The Optuna distribution each flag of `space` is suggested from (what a study's trials record)."""
    kinds = {"log": lambda v: FloatDistribution(*v, log=True), "float": lambda v: FloatDistribution(*v),
             "int": lambda v: IntDistribution(*v), "choice": lambda v: CategoricalDistribution(v)}
    return {flag: kinds[kind](values) for flag, (kind, values) in space.items()}


def describe_space(dists):
    """--space's spelling of {flag: distribution}."""
    def one(d):
        if hasattr(d, "choices"):
            return ",".join(map(str, d.choices))
        kind = "log" if getattr(d, "log",
                                False) else "float" if type(d).__name__ == "FloatDistribution" else "int"
        return f"{kind}:{d.low:g}:{d.high:g}"
    return " ".join(f"{flag}={one(d)}" for flag, d in sorted(dists.items()))


def space_size(space):
    """How many distinct configurations the space holds (inf with a range)."""
    return math.prod(len(v) if kind == "choice" else math.inf for kind, v in space.values())
