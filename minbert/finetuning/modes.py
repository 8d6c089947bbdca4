"""What trains under `--fine-tune-mode`, in both pipelines, and what `--merge` does with it: one row of MODES
per mode, the flag's choices read from it.

    last-linear-layer  BERT frozen; the task heads train (the handout's default for Part 1)
    full-model         every parameter trains
    lora, dora         low-rank adapters on a frozen BERT (lora.py; Hu et al. 2022, Liu et al. 2024)
    adapter            bottleneck adapters after each sub-layer, and the LayerNorms (houlsby.py;
                       Houlsby et al. 2019)
    prefix             trainable keys and values prepended in every layer (prefix.py; Li and Liang 2021)

`--merge` makes inference cost what the plain model costs where the mode allows it: LoRA and DoRA fold into
BERT's weights, a prefix drops its reparameterisation MLP; Houlsby adapters have a nonlinearity between their
projections, so nothing can be folded and --merge is refused for them, saying why.

One table serves minBERT's pipelines, Build GPT-2's classifier and bench.py: each row says what trains (the
--fine-tune-mode help is built from it), whether the backbone stays frozen, whether the default learning rate
is the new weights' (two facts, which happen to agree for every mode here), and which scripts take the mode.

A new method is a module beside these (its paper and equation in the docstring) and one row here: how to
attach it, how to merge it (or why it cannot be merged), what trains, and which default learning rate it takes.
docs/architecture.md walks through adding one.
"""
from dataclasses import dataclass
from typing import Callable, Optional

from minbert.cli import MinbertError
from minbert.finetuning.houlsby import add_houlsby_adapters
from minbert.finetuning.lora import add_adapters, merge_adapters
from minbert.finetuning.prefix import add_prefix

@dataclass(frozen=True)
class Mode:
    """One --fine-tune-mode: `attach(bert, spec)` sets what trains (adding the mode's modules,
    returned); `merge(bert)` folds them for inference and returns the line saying so, or `no_merge` is
    the line saying why it cannot."""
    attach: Callable
    trains: str                           # what trains, for --help ({} is the backbone: BERT, GPT-2)
    frozen_backbone: bool                 # the backbone's own weights stay as loaded: only new weights train
    new_weights_lr: bool                  # the default learning rate is the new weights' (flags/defaults.py)
    merge: Optional[Callable] = None
    no_merge: str = ""
    lora_flags: bool = False              # the --lora_* flags configure it
    gpt2_files: Optional[str] = None      # Build GPT-2's classifier takes it and names its files so; None: not
    bench: bool = False                   # bench.py times it


NOTHING_TO_FOLD = ("--merge folds LoRA/DoRA adapters into the weights (or a prefix's MLP into the prefix), "
                   "but this model is {}: it needs --fine-tune-mode lora, dora or prefix")


def _train_bert(trains):
    def attach(bert, spec):
        for p in bert.parameters():
            p.requires_grad = trains
        return []
    return attach


def _attach_lora(dora):
    def attach(bert, spec):
        hidden = bert.config.hidden_size  # every target linear has the hidden size on one side
        if spec.lora_rank > hidden:
            raise MinbertError(f"--lora_rank {spec.lora_rank}: above the hidden size {hidden} of "
                               f"{spec.pretrained}, where B A cannot have a higher rank than {hidden} and "
                               f"only adds parameters; at most --lora_rank {hidden} "
                               "(full rank), or --fine-tune-mode full-model")
        return add_adapters(bert, spec.lora_targets, spec.lora_rank, spec.lora_alpha, spec.lora_dropout,
                            dora=dora)
    return attach


def _attach_houlsby(bert, spec):
    hidden = bert.config.hidden_size
    if spec.adapter_dim > hidden:  # a bottleneck is narrower than what it squeezes (the paper: 8 to 256 of 768+)
        raise MinbertError(f"--adapter_dim {spec.adapter_dim}: above the hidden size {hidden} of {spec.pretrained}, "
                           f"where a bottleneck wider than the layer it squeezes only adds parameters; at most "
                           f"--adapter_dim {hidden}, or --fine-tune-mode full-model")
    return add_houlsby_adapters(bert, spec.adapter_dim)


def _attach_prefix(bert, spec):
    bert.prefix_tuning = add_prefix(bert, spec.prefix_length)  # a submodule: saved, moved with the model
    return [bert.prefix_tuning]


def _fold_prefix(bert):
    bert.prefix_tuning.fold()
    return "merged the prefix: its reparameterisation MLP is computed once and dropped"


def _merge_lora(bert):
    return f"merged {merge_adapters(bert)} adapters into BERT's weights"


# Build GPT-2's classifier names its files by the handout's words for its two modes (pretrain-, finetune-), and
# by the mode's own name for the others.
MODES = {
    "last-linear-layer": Mode(_train_bert(False), "the head on a frozen {}", frozen_backbone=True,
                              new_weights_lr=True, no_merge=NOTHING_TO_FOLD.format("last-linear-layer"),
                              gpt2_files="pretrain", bench=True),
    "full-model": Mode(_train_bert(True), "the whole model", frozen_backbone=False, new_weights_lr=False,
                       no_merge=NOTHING_TO_FOLD.format("full-model"), gpt2_files="finetune", bench=True),
    "lora": Mode(_attach_lora(False), "low-rank adapters on a frozen {}, Hu et al. 2022", frozen_backbone=True,
                 new_weights_lr=True, merge=_merge_lora, lora_flags=True, gpt2_files="lora", bench=True),
    "dora": Mode(_attach_lora(True), "weight-decomposed low-rank adapters, Liu et al. 2024", frozen_backbone=True,
                 new_weights_lr=True, merge=_merge_lora, lora_flags=True, gpt2_files="dora", bench=True),
    "adapter": Mode(_attach_houlsby,
                    "bottleneck adapters after each sub-layer, Houlsby et al. 2019", frozen_backbone=True,
                    new_weights_lr=True,
                    no_merge="--merge cannot fold Houlsby adapters: a nonlinearity sits between their two "
                             "projections, so they are no change of BERT's weights; "
                             "they run at inference as they are (drop --merge)", gpt2_files="adapter"),
    "prefix": Mode(_attach_prefix, "trainable keys and values in every layer, Li and Liang 2021",
                   frozen_backbone=True, new_weights_lr=True, merge=_fold_prefix),
}
FINE_TUNE_MODES = list(MODES)
# the modes the --lora_* flags configure; those Build GPT-2's classifier and bench.py take
ADAPTER_MODES = tuple(name for name, m in MODES.items() if m.lora_flags)
GPT2_MODES = tuple(name for name, m in MODES.items() if m.gpt2_files)
BENCH_MODES = tuple(name for name, m in MODES.items() if m.bench)
NEW_WEIGHTS_LR_MODES = tuple(name for name, m in MODES.items() if m.new_weights_lr)


def modes_help(names, backbone="BERT"):
    """What trains under each of `names`, for --fine-tune-mode's help."""
    return "; ".join(f"{n}: {MODES[n].trains.format(backbone)}" for n in names)


def check_merge(mode):
    """--merge: refused, in one line, for a mode that has nothing to fold."""
    if MODES[mode].merge is None:
        raise MinbertError(MODES[mode].no_merge)


def merge_for_inference(bert, merge, mode, log=print):
    """--merge, in every pipeline: fold what the mode allows before the final predictions."""
    if not merge:
        return
    check_merge(mode)
    log(MODES[mode].merge(bert))


def prepare_backbone(bert, spec):
    """Set what of `bert` trains under spec.fine_tune_mode (a specs.ModelSpec), adding the mode's new modules.
    Both pipelines call this. Returns the new modules (adapters, or the prefix)."""
    if spec.fine_tune_mode not in MODES:
        raise ValueError(f"unknown fine-tune mode {spec.fine_tune_mode!r}; choose from {', '.join(MODES)}")
    return MODES[spec.fine_tune_mode].attach(bert, spec)
