"""What the table of flags (table.py ROWS) builds: each script's argparse parser (`parser`), the rules of its idle
flags (`idle_rules`), the values a script does not take but its settings need (`defaults`), the flags Build
GPT-2 leaves out (`absent`); and what reads which flags were typed. They live here, not in the scripts, so that
sweep.py, tools/ and the generated docs/flags.md read the same declarations the scripts parse; settings.py
turns what they parse into the typed settings the library takes."""

from minbert.cli import Parser
from minbert.course_data import TASK_PREFIX
from minbert.flag import G1, GP, GPT2, GS, P1, P2, PRE, TRAINING, per
from minbert.flags import table, types

NOT_GPT2 = "not available for GPT-2; drop it"


# The scripts as a user runs them, each with what its --help says it does.
SCRIPTS = {
    P1: ("classifier.py", "Part 1: fine-tune BERT for sentiment on SST and CFIMDB."),
    P2: ("multitask_classifier.py", "Part 2: one BERT for sentiment (SST), paraphrase (Quora) and similarity "
                                    "(STS)."),
    PRE: ("pretrain.py", "Further masked-LM (and next-sentence) pretraining on the task text."),
    G1: ("classifier.py", "Build GPT-2, Part 1: sentiment on SST and CFIMDB from GPT-2's last token."),
    GP: ("paraphrase_detection.py", "Build GPT-2, Part 2: Quora paraphrase detection as a cloze task (the LM "
                                    "answers yes or no)."),
    GS: ("sonnet_generation.py", "Build GPT-2, Part 2: fine-tune on the sonnets, then complete held-out ones "
                                 "from their first three lines."),
}


# ----------------------------------------------------------------------------- what the rows build

def rows(script):
    """The rows `script` takes, in the table's order."""
    return [r for r in table.ROWS if script in r.scripts]


def absent(script):
    """{spelling: why} of the flags a Build GPT-2 script leaves out on purpose (utils.Parser's `absent`): typed,
    each is one line saying why, not 'unrecognized'."""
    if script not in GPT2:
        return {}
    return {r.spelling: f"{r.not_gpt2}: {NOT_GPT2}" for r in table.ROWS if r.not_gpt2 and script not in r.scripts}


def parser(script, prog=None, description=None):
    """`script`'s argparse parser, built from its rows."""
    name, words = SCRIPTS.get(script, (f"{script}.py", ""))
    ap = Parser(prog=prog or name, description=description or words, absent=absent(script))
    groups = {}
    for r in rows(script):
        title = per(r.group, script)
        target = ap if title is None else groups.setdefault(title, ap.add_argument_group(title))
        target.add_argument(r.spelling, **_argparse_kw(r, script))
    if script in TRAINING:
        ap.set_defaults(checkpoint_name=None)  # --checkpoint PATH's file name (runs/folders.py), when given
    return ap


def _argparse_kw(row, script):
    kind, kw = per(row.kind, script), {"dest": row.dest, "help": per(row.help, script)}
    if row.action is not None:
        kw["action"] = row.action
    if kind == "switch":
        kw["action"] = "store_true"
    elif kind == "off":
        kw["action"] = "store_false"
    else:
        if isinstance(kind, tuple):
            kw["choices"] = list(kind)
        elif kind is not None:
            kw["type"] = kind if callable(kind) else getattr(types, kind)
        kw["default"] = per(row.default, script)
    for key in ("nargs", "metavar", "const"):
        if getattr(row, key) is not None:
            kw[key] = getattr(row, key)
    return kw


def value(dest, script):
    """The default of the flag `dest` in `script`."""
    return next(per(r.default, script) for r in table.ROWS if r.dest == dest and script in r.scripts)


def idle_rules(script):
    """{destination: (acts(values, typed), what it does)} of `script`'s flags that a configuration can leave
    idle (minbert/flags/typed.py check_idle_flags)."""
    return {r.dest: per(r.idle, script) for r in rows(script) if per(r.idle, script) is not None}


def defaults(script):
    """{destination: its value in `script`} of the flags the script does not take but its settings need (a row's
    `implied`: pretrain.py's recipe beyond its own flags, the adapters and datasets of Build GPT-2's cloze task),
    each from its row."""
    return {r.dest: per(r.default, script) for r in table.ROWS if script in r.implied}


# ----------------------------------------------------------------------------- the pipelines' parsers

def classifier_parser():
    return parser(P1)


def multitask_parser(prog=None, description=None):
    return parser(P2, prog, description)


def pretrain_parser():
    return parser(PRE)


# The handout's flag prefix of each task: --para_train, --para_dev_out, ... are Quora's.
FLAG_PREFIX = TASK_PREFIX
# The flags that shape a multitask model (specs.ModelSpec): --eval_only takes them from the checkpoint.
ARCHITECTURE = ("pretrained", "fine_tune_mode", "lora_rank", "lora_alpha", "lora_targets", "pair_encoding",
                "pooling", "pals", "pals_dim", "siamese_proj", "adapter_dim", "prefix_length", "shared_head")


# What --eval_only reads of the flags: the model comes from its checkpoint (architecture flags typed must
# agree with it), so every training flag is ignored, and a line says which.
EVAL_ONLY_FLAGS = ({"eval_only", "merge", "amp", "attn", "use_gpu", "max_length", "data_dir", "run_dir",
                    "run_name", "backup", *ARCHITECTURE}
                   | {f"{p}_{s}" for p in FLAG_PREFIX.values()
                      for s in ("dev", "test", "dev_out", "test_out")})
