"""The defaults that are decisions, in one table (RULES): each row sets one flag's default where a rule does (by
script, --recipe, what trains, the checkpoint's width, the optimizer), and says where its value comes from: a
measurement (the RESULTS.md section that holds it), a paper, a handout, or a choice not measured. The learning
rate's resolver (resolve_lr) and the reason the start line gives, --lr's help (lr_help), the defaults and help
of the flags that follow a row (`ruled`), --recipe handout's values (`handout`) and README's "What the defaults
run" (tools/flag_docs.py) all read the rows, and every reason is built from a row's fields: a default changes in
its row alone, and no reason can go on saying an old value. A default that is simply one script's value stays in
the flag's row (flags/model_rows.py, ...) or in its settings dataclass.

Also here: whether the training step is recorded as CUDA graphs (resolve_record_step), which depends on the
machine."""
from dataclasses import dataclass
from typing import Optional

from minbert.finetuning.modes import MODES
from minbert.flag import (BENCH, BERT, G1, GP, GPT2, P1, P2, PRE, TRAINING, Chosen, Handout, Measured, Paper,
                          Per)
from minbert.objectives.regularizers import REGULARIZERS
from minbert.training.recorded import cannot_record

# What a fine-tune mode trains, as a row's `trains` reads it: only new weights (the mode's new_weights_lr,
# finetuning/modes.py) or the whole model.
NEW, WHOLE = "new weights", "the whole model"


@dataclass(frozen=True)
class Rule:
    """One default: the flag's destination `setting`, its `value` (with `optimizer`: a factor on AdamW's rate),
    its `source` (flag.Measured, Paper, Handout or Chosen), and when it applies: in `scripts`, under `recipe`
    ("handout": --recipe handout only; None: either, where no handout row above holds), where `trains` (NEW or
    WHOLE, by the fine-tune mode; None: whatever trains), on a checkpoint whose hidden size lies in `hidden`
    ((low, high), high left out, None for no bound), and for `optimizer`. The first row that holds sets the
    default; where none does, the flag's own stands."""
    setting: str
    value: object
    source: object
    scripts: frozenset
    recipe: Optional[str] = None
    trains: Optional[str] = None
    hidden: Optional[tuple] = None
    optimizer: Optional[str] = None

    @property
    def plain(self):
        """Whether it holds in its scripts whatever the other flags say (a parser's default can take it)."""
        return self.trains is None and self.hidden is None and self.optimizer is None


MINBERT, GPT2_HANDOUT = Handout("the minBERT handout's"), Handout("the GPT-2 handout's")
BOTH, PLAIN = Handout("both handouts'"), Handout("both handouts' plain training")
ROBERTA = Paper("Liu et al. 2019, table 9")

RULES = (
    # --- --recipe handout: the handouts' own values, first, so that under it they hold before the rows below;
    # the plain training (constant rate, no warm-up, clipping or regulariser) and Part 2's own
    Rule("lr", 1e-5, Handout("the minBERT handout's, multitask_classifier.py's own"), frozenset({P2}),
         recipe="handout"),
    Rule("lr", 1e-5, MINBERT, frozenset({P1}), recipe="handout", trains=WHOLE),
    Rule("scheduler", "constant", PLAIN, TRAINING, recipe="handout"),
    Rule("warmup_ratio", 0.0, PLAIN, TRAINING, recipe="handout"),
    Rule("max_grad_norm", 0.0, PLAIN, TRAINING, recipe="handout"),
    *(Rule(r.weight, 0.0, PLAIN, BERT if r.gpt2 else TRAINING, recipe="handout") for r in REGULARIZERS.values()),
    Rule("fine_tune_mode", "last-linear-layer", MINBERT, frozenset({P2}), recipe="handout"),
    Rule("batch_size", 8, MINBERT, frozenset({P2}), recipe="handout"),
    Rule("hidden_dropout_prob", 0.3, MINBERT, frozenset({P2}), recipe="handout"),
    # --- the learning rate, by what trains and how wide the checkpoint is
    # heads, adapters, PALs on a frozen backbone: the rate both handouts give the head alone
    Rule("lr", 1e-3, Handout("both handouts' for last-linear-layer"), BERT | GPT2, trains=NEW),
    Rule("lr", 1e-5, GPT2_HANDOUT, GPT2, trains=WHOLE),
    Rule("lr", 1e-4, Measured("verdicts-with-significance-tests"), BERT, trains=WHOLE, hidden=(0, 768)),
    # measured on the narrow MiniLM only: from bert-base's width up, within the BERT paper's range
    Rule("lr", 3e-5, Paper("Devlin et al. 2019, appendix A.3", (2e-5, 5e-5)), BERT, trains=WHOLE, hidden=(768, None)),
    Rule("lr", 5e-5, Chosen("a short further pretraining"), frozenset({PRE})),
    # the other optimizers' rates, a factor on AdamW's: Lion moves every coordinate by the rate, so its rate is
    # below AdamW's; LAMB's is a step relative to each tensor's norm (too low, it underfits; too high, it collapses)
    Rule("lr", 1 / 3, Paper("Chen et al. 2023", (1 / 10, 1 / 3)), TRAINING, optimizer="lion"),
    Rule("lr", 5.0, Measured("one-lever-at-a-time-at-the-reduced-budget"), TRAINING, optimizer="lamb"),
    # --- what trains, and the dropout before a head
    Rule("fine_tune_mode", "last-linear-layer", BOTH, frozenset({P1, G1})),
    Rule("hidden_dropout_prob", 0.3, BOTH, frozenset({P1, G1, GP})),
    # --- the regularisers: each one's weight in each pipeline's default recipe, with its source, from its row
    # (objectives/regularizers.py). Part 1's for full-model only: they need BERT in the graph, and
    # last-linear-layer trains on cached features. bench.py times Part 2's default step.
    *(Rule(r.weight, *r.defaults[P1], frozenset({P1}), trains=WHOLE) for r in REGULARIZERS.values()),
    *(Rule(r.weight, *r.defaults[P2], frozenset({P2, BENCH})) for r in REGULARIZERS.values()),
    # --- pretrain.py's recipe, where it is not the fine-tuning one
    Rule("epochs", 3, Chosen("a short further pretraining"), frozenset({PRE})),
    Rule("weight_decay", 0.01, ROBERTA, frozenset({PRE})),
    Rule("warmup_ratio", 0.06, ROBERTA, frozenset({PRE})),
    Rule("max_grad_norm", 1.0, ROBERTA, frozenset({PRE})),
)

# The regularisers' weights (objectives/regularizers.py), each the flag that switches one on.
REGULARIZER_WEIGHTS = tuple(r.weight for r in REGULARIZERS.values())


# ----------------------------------------------------------------------------- reading the rows

def trains(mode):
    """NEW or WHOLE: what `mode` (a --fine-tune-mode) trains, as the rows' `trains` reads it."""
    return NEW if MODES[mode].new_weights_lr else WHOLE


def rule(setting, script, recipe="best", mode=None, hidden=None):
    """The first row setting `setting` in `script` under --recipe `recipe`, fine-tune mode `mode` and a checkpoint
    of hidden size `hidden` (a condition on what is None does not hold), or None: the flag's own default."""
    for r in RULES:
        if (r.setting == setting and r.optimizer is None and script in r.scripts and r.recipe in (None, recipe)
                and (r.trains is None or (mode is not None and trains(mode) == r.trains))
                and (r.hidden is None or (hidden is not None and _within(hidden, r.hidden)))):
            return r
    return None


def value(setting, script, otherwise, recipe="best", mode=None, hidden=None):
    """The default of `setting` in `script` (see rule), or `otherwise` where no row sets it."""
    found = rule(setting, script, recipe, mode, hidden)
    return otherwise if found is None else found.value


def factor(optimizer, script):
    """The row of `optimizer`'s factor on AdamW's rate in `script`, or None (AdamW's own rate)."""
    return next((r for r in RULES if r.optimizer is not None and r.optimizer == optimizer and script in r.scripts),
                None)


def ruled(setting, default):
    """A flag's default (a value, or a Per by script) with every script that a plain row sets (not only under
    --recipe handout) taking that row's value: what a parser's default is where a row decides it."""
    out = Per(default.other, **default) if isinstance(default, Per) else Per(default)
    for r in reversed([r for r in RULES if r.setting == setting and r.recipe is None and r.plain]):
        out.update(dict.fromkeys(r.scripts, r.value))  # in reverse, so that the first row holding wins
    return out


def handout_rows(script):
    """The rows --recipe handout puts in force in `script` whatever the other flags say, one per setting."""
    out = {}
    for r in RULES:
        if r.recipe == "handout" and r.plain and script in r.scripts:
            out.setdefault(r.setting, r)
    return list(out.values())


def handout(script):
    """{destination: value} that --recipe handout puts in force in `script` (flags/typed.py parse_flags)."""
    return {r.setting: r.value for r in handout_rows(script)}


def _within(hidden, bounds):
    low, high = bounds
    return hidden >= low and (high is None or hidden < high)


# ----------------------------------------------------------------------------- the rows in words

def rate(lr):
    """A learning rate as people write it: 1e-3, 3e-5, 2.5e-5."""
    mantissa, exponent = f"{lr:e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


FRACTIONS = {2: "half", 3: "a third", 4: "a quarter", 5: "a fifth", 10: "a tenth"}
MULTIPLES = {2: "twice", 3: "three times", 4: "four times", 5: "five times", 10: "ten times"}


def times(f):
    """A factor on AdamW's rate in words: 'a third of AdamW's', 'five times AdamW's'."""
    n = round(1 / f) if f < 1 else round(f)
    if f < 1 and abs(n * f - 1) < 1e-9 and n in FRACTIONS:
        return f"{FRACTIONS[n]} of AdamW's"
    return f"{MULTIPLES[n] if f == n and n in MULTIPLES else f'{f:g} times'} AdamW's"


def shown(r, v):
    """Value `v` of row `r`'s setting, as its words write it."""
    if r.optimizer is not None:
        return times(v)
    return rate(v) if r.setting == "lr" else f"{v:g}" if isinstance(v, float) else str(v)


def source_words(r, link=False):
    """Where row `r`'s value comes from, in words (`link`: RESULTS.md as a Markdown link)."""
    s = r.source
    if isinstance(s, Measured):
        return f"measured on {s.on}, " + (f"[RESULTS.md](RESULTS.md#{s.anchor})" if link else f"RESULTS.md#{s.anchor}")
    if isinstance(s, Paper):
        if s.span is None:
            return s.citation
        low, high = (shown(r, v) for v in s.span)
        if r.optimizer is not None:  # 'a tenth to a third of AdamW's'
            low = low.removesuffix(" of AdamW's")
        return f"{s.citation}: {low} to {high}"
    return s.which if isinstance(s, Handout) else f"chosen, not measured: {s.why}"


def _width(bounds, hidden=None):
    """A row's bounds on the hidden size in words: for --help, or with `hidden` as a checkpoint has it."""
    low, high = bounds
    if hidden is not None:
        return f"a checkpoint of hidden size {hidden} " + " and ".join(
            ([f">= {low}"] if low else []) + ([f"< {high}"] if high is not None else []))
    return " and ".join(([f"from hidden size {low} up"] if low else [])
                        + ([f"below hidden size {high}"] if high is not None else []))


def condition(r, modes=()):
    """When row `r` holds, for --help and the README (' for full-model below hidden size 768', ' under --recipe
    handout'): `modes` are the fine-tune modes its script takes."""
    words = []
    if r.trains == NEW:
        words.append(", ".join(m for m in modes if trains(m) == NEW))
    elif r.trains == WHOLE:
        words.append("full-model")
    if r.hidden is not None:
        words.append(_width(r.hidden))
    return (" for " + " ".join(words) if words else "") + (" under --recipe handout" if r.recipe == "handout" else "")


def said(r, modes=(), link=False):
    """Row `r` in words: its value, when it holds and its source ('1e-4 for full-model below hidden size 768
    (measured on ...)')."""
    note = "only new weights train; " if r.trains == NEW else ""
    return f"{shown(r, r.value)}{condition(r, modes)} ({note}{source_words(r, link)})"


def factors_said(script, link=False):
    """Each optimizer's factor on AdamW's default rate in `script`, with its source."""
    return [f"--optimizer {r.optimizer} takes {times(r.value)} ({source_words(r, link)})"
            for r in RULES if r.optimizer is not None and script in r.scripts]


def lr_said(script, modes, link=False, with_handout=True):
    """The rows of `script`'s default learning rate in words, --recipe handout's last (or, without
    `with_handout`, left out); a row for the new weights only where the script takes a mode that trains them."""
    rows = [r for r in RULES if r.setting == "lr" and r.optimizer is None and script in r.scripts
            and (r.trains != NEW or any(trains(m) == NEW for m in modes))
            and (with_handout or r.recipe != "handout")]
    return [said(r, modes, link) for r in sorted(rows, key=lambda r: r.recipe == "handout")]


def sourced(setting, text):
    """A flag's help (a text, or a Per by script) with, in each script where a plain row sets its default, that
    default and its source."""
    out = Per(text.other, **text) if isinstance(text, Per) else Per(text)
    for s in {s for r in RULES if r.setting == setting for s in r.scripts}:
        found = rule(setting, s)
        if found is not None and found.plain:
            out[s] = f"{out.of(s)} (default {shown(found, found.value)}: {source_words(found)})"
    return out


def lr_help(script, modes):
    """--lr's help in `script`, which takes fine-tune modes `modes`: the rows resolve_lr reads."""
    return "default " + "; ".join(lr_said(script, modes) + factors_said(script))


def _default_for(r, mode, hidden):
    """'default for ...': when row `r` holds, as the start line says it of this run's mode and checkpoint."""
    what = WHOLE if r.trains == WHOLE else None
    if r.trains == NEW:
        what = f"--fine-tune-mode {mode}" + (", where only new weights train: adapters, PALs or heads"
                                             if MODES[mode].frozen_backbone else "")
    return ("default" + (f" for {what}" if what else "") + (f" on {_width(r.hidden, hidden)}" if r.hidden else "")
            + (" under --recipe handout" if r.recipe == "handout" else ""))


# ----------------------------------------------------------------------------- resolving

def resolve_lr(lr, script, fine_tune_mode, optimizer, hidden_size, recipe="best"):
    """(the learning rate, the reason the start line gives): `lr` when typed, else the first row of RULES that
    holds for `script`, --recipe `recipe`, what `fine_tune_mode` trains and the checkpoint's `hidden_size`, times
    `optimizer`'s factor where its row has one; the reason is built from the rows' fields, their sources named."""
    if lr is not None:
        return lr, f"lr {lr:g}"
    base = rule("lr", script, recipe, fine_tune_mode, hidden_size)
    if base is None:
        raise ValueError(f"no learning-rate row of minbert/flags/defaults.py holds for {script} "
                         f"({fine_tune_mode}, hidden size {hidden_size}, --recipe {recipe})")
    why = f"{_default_for(base, fine_tune_mode, hidden_size)}; source: {source_words(base)}"
    scale = factor(optimizer, script)
    if scale is None:
        return base.value, f"lr {base.value:g} ({why})"
    lr = base.value * scale.value
    return lr, (f"lr {lr:g} (--optimizer {optimizer}: {times(scale.value)}, source: {source_words(scale)}; "
                f"AdamW's lr {base.value:g} is the {why})")


def resolve_record_step(flags, recipe, device, amp, world, eager=None):
    """(whether the training step is recorded as CUDA graphs, the start line's reason), from the parsed flags
    `v` (--no_record_step, --sampler), the run's Recipe, the resolved precision and the number of processes:
    recorded on a CUDA GPU unless --no_record_step, and only when nothing in the run needs the eager step
    (training/recorded.py cannot_record, or the pipeline's own reason `eager`).

    Recorded is the GPU's default because tools/gpu_check.sh showed it correct there (50 bf16 steps equal to
    eager, new dropout masks at every replay, an exact resume) and faster than the eager step on the same card,
    for MiniLM and for the bert-base shape (RESULTS.md, "The recorded training step on an NVIDIA H100")."""
    if device.type != "cuda":
        return False, (f"eager (recording the step as CUDA graphs needs a CUDA GPU; {device.type} runs it "
                       "as it comes)")
    if not flags.get("record_step", True):
        return False, "eager (--no_record_step)"
    why = cannot_record(recipe, amp, world, every_task=flags.get("sampler") == "all") + ([eager] if eager else [])
    if why:
        return False, "eager (the recorded step, a GPU's default, cannot take " + "; ".join(why) + ")"
    return True, ("recorded (a GPU's default: one CUDA graph per batch shape, recorded once and replayed: "
                  "forward, backward, clipping, AdamW and the schedule; --no_record_step runs it eagerly)")
