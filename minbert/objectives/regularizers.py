"""The regularisers either pipeline can add to its training loss, one row each: R-Drop (rdrop.py) and SMART's
two terms (smart.py). Everything else reads this table: the loss (losses.py TermLoss adds each term that is
on, in the table's order), the flags (minbert/flags/recipe_rows.py makes a row of each row's flags,
flags/defaults.py switches every weight off under --recipe handout, flags/rules.py refuses a flag that shapes
a term which is off), the settings (Regularizers below, one field per flag), bench.py (its `recipe` row and
the terms it names) and GPT-2's scripts, which leave out the rows GPT-2 does not take (each of their flags,
typed there, is one line saying why). Each row's weight in each pipeline's default recipe, with where that
value comes from, becomes a row of the table of defaults (flags/defaults.py), which the flags' defaults and help,
Part 1's resolution by fine-tune mode and README's table read (--recipe handout switches every one off).

A new regulariser is its module plus one row here:
  - The module holds an nn.Module, with its paper and equation in the docstring, and its flags (FLAGS, a tuple
    of flag.Flag, the weight first: 0 is off). The module's `build(spec, model, total_steps)` makes it from
    the settings; its `regularize(loss, p)` takes the task loss so far and the pass `p` (a Pass) and returns
    the new task loss and the term, which is added to the loss and whose epoch mean is logged under the row's
    name. An `after_step()` method, if it has one, follows every optimizer step (SMART's Bregman teacher).
  - The row names it, says what messages call it, gives its weight's default in each pipeline's default recipe
    with its source (0 until a measurement in RESULTS.md says otherwise) and, for one that GPT-2 does not take,
    why.
Then `python tools/flag_docs.py` rewrites docs/flags.md; docs/architecture.md walks an example.
"""
import dataclasses
from typing import Callable, Mapping, NamedTuple, Optional

from minbert.flag import Measured
from minbert.objectives import rdrop, smart


@dataclasses.dataclass(frozen=True)
class Regularizer:
    name: str                      # its term in the log (loss_terms) and in bench.py's lines
    label: str                     # what it is called in a message ("R-Drop")
    module: Callable               # its nn.Module: .build(spec, model, total_steps), .regularize(loss, p)
    flags: tuple                   # its flags (flag.Flag), the weight first (0: off)
    # {pipeline: (its weight in that pipeline's default recipe, where the value comes from: a flag.Measured, ...)}
    defaults: Mapping
    gpt2: Optional[str] = None     # None: GPT-2's scripts take it; else why they do not
    # it perturbs the backbone's embeddings, so it needs their gradient: frozen layers and cached features
    # (last-linear-layer) are refused with it (flags/rules.py)
    embedding_gradient: bool = False

    @property
    def weight(self):
        """The destination of the flag that switches it on."""
        return self.flags[0].dest


# The measurements that set the default recipes' weights: every term against none, in each pipeline (RESULTS.md).
PART1, PART2 = Measured("part-1-sst-full-model-3-epochs"), Measured("part-2-the-reduced-budget-then-3-epochs")
REGULARIZERS = {r.name: r for r in (
    Regularizer("rdrop", "R-Drop", rdrop.RDrop, rdrop.FLAGS, {"classifier": (0.0, PART1), "multitask": (2.0, PART2)}),
    Regularizer("smart", "SMART's adversarial term", smart.SmartRegularizer, smart.SMART_FLAGS,
                {"classifier": (0.0, PART1), "multitask": (0.0, Measured("verdicts-with-significance-tests"))},
                gpt2="SMART perturbs BERT's own embedding output", embedding_gradient=True),
    Regularizer("bregman", "SMART's Bregman teacher", smart.BregmanProximal, smart.BREGMAN_FLAGS,
                {"classifier": (0.0, PART1), "multitask": (0.0, PART2)}, gpt2="SMART's Bregman step, BERT's recipe"),
)}


# The settings of every regulariser, one field per flag of the table (its destination and default): what the
# flags become (flags/settings.py builds it with from_flags) and what the loss reads.
Regularizers = dataclasses.make_dataclass(
    "Regularizers", [(f.dest, object, dataclasses.field(default=f.default))
                     for r in REGULARIZERS.values() for f in r.flags], frozen=True)
Regularizers.__doc__ = ("The regularisers' settings (objectives/regularizers.py REGULARIZERS: one field per "
                        "flag, at its default); a weight of 0 is off.")
Regularizers.__module__ = __name__


def regularizer_weights(spec):
    """{name: weight} of the regularisers `spec` (a Regularizers, or None for none) switches on, in the
    table's order."""
    weights = {name: getattr(spec, r.weight) for name, r in REGULARIZERS.items()} if spec is not None else {}
    return {name: w for name, w in weights.items() if w}


def build_regularizers(spec, model, total_steps):
    """{name: the term's module, or None when off} of `spec` (a Regularizers, or None) over a run of
    `total_steps` optimizer steps of `model`."""
    on = regularizer_weights(spec)
    return {name: r.module.build(spec, model, total_steps) if name in on else None
            for name, r in REGULARIZERS.items()}


class Pass(NamedTuple):
    """One batch's training pass, as a regulariser sees it: the model, `forward()` running the batch through
    it again (a new result), `first` (the training pass's result), `task_loss(result)` and `output(result)`
    (a result's task loss and its output tensor), the output's kind for smart.divergence ('multiclass',
    'binary', 'regression') and the row weights of a fixed-shape batch (objectives/rows.py; None: all
    rows)."""
    model: object
    forward: Callable
    first: object
    task_loss: Callable
    output: Callable
    kind: str
    weight: Optional[object] = None

    def rerun(self):
        """The batch's output from a new pass."""
        return self.output(self.forward())
