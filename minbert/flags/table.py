"""Every flag of the training scripts, one row each (flag.Flag): minBERT's classifier.py,
multitask_classifier.py and pretrain.py, Build GPT-2's classifier.py, paraphrase_detection.py and
sonnet_generation.py, and bench.py, which times their step. A row says the flag's spelling, type, default and
help (a Per where scripts differ), which scripts take it and in which argument group, and, where a
configuration would ignore it, the rule that refuses it. The rows live by concept (model_rows.py: what trains,
on what, and the adapters; runtime_rows.py: speed and the run folder; recipe_rows.py: the training recipe and
the regularisers); ROWS below is the one list of them all, in --help's order. The parsers (`parser`), the rules
(`idle_rules`), the values a script does not take but its settings need (`defaults`), the flags Build GPT-2
leaves out (`absent`) and docs/flags.md (tools/flag_docs.py) are all built from ROWS; the settings take each value
by its destination (settings.from_flags).

A new flag is one row in the module of its concept (or, for a regulariser, in its module's FLAGS) and a field of
the same name in the settings dataclass that carries it. Defaults that are the settings' own (Recipe's,
ModelSpec's, each pipeline's batch size) are read from those dataclasses, and defaults that are decisions from
flags/defaults.py's table, so each is written once.
"""
from dataclasses import fields

from minbert.flag import Flag, Per
from minbert.flags import model_rows, recipe_rows, runtime_rows


def all_rows():
    """Every row, in --help's order: what trains and on what, speed, the adapters, the recipe, the run folder.
    Built at import (ROWS); built again, they read flags/defaults.py's table as it is then."""
    rows = [*model_rows.rows(), *runtime_rows.speed_rows(), *model_rows.adapter_rows(), *recipe_rows.rows(),
            *runtime_rows.run_rows()]
    return [_filled(r) for r in rows]


def _filled(row):
    """A row whose Per texts say `...` (the same as the entry before) filled in."""
    def fill(value):
        if not isinstance(value, Per):
            return value
        out, last = Per(value.other), value.other
        for k, v in value.items():
            last = last if v is ... else v
            out[k] = last
        return out
    return Flag(**{f.name: fill(getattr(row, f.name)) for f in fields(Flag)})


ROWS = all_rows()
