"""What trains under `--fine-tune-mode`, in both pipelines, and what `--merge` does with it.

    last-linear-layer  BERT frozen; the task heads train (the handout's default for Part 1)
    full-model         every parameter trains
    lora, dora         low-rank adapters on a frozen BERT (lora.py; Hu et al. 2022, Liu et al. 2024)
    adapter            bottleneck adapters after each sub-layer, and the LayerNorms (houlsby.py; Houlsby et al. 2019)
    prefix             trainable keys and values prepended in every layer (prefix.py; Li and Liang 2021)

`--merge` makes inference cost what the plain model costs where the mode allows it: LoRA and DoRA fold into
BERT's weights, a prefix drops its reparameterisation MLP; Houlsby adapters have a nonlinearity between their
projections, so nothing can be folded and --merge is refused for them, saying why.
"""
from houlsby import add_houlsby_adapters
from lora import add_adapters, merge_adapters
from prefix import add_prefix
from utils import MinbertError

FINE_TUNE_MODES = ["last-linear-layer", "full-model", "lora", "dora", "adapter", "prefix"]
ADAPTER_MODES = ("lora", "dora")  # the modes the --lora_* flags configure
NEW_WEIGHT_MODES = ("lora", "dora", "adapter", "prefix")  # BERT frozen, only new weights (and heads) train
# Where only adapters (or other new modules) and heads train, a larger default rate than full fine-tuning's
# (Hu et al. 2022 train LoRA at about 10x).
ADAPTER_LR = 1e-3


def check_merge(mode):
    """--merge: refused, in one line, for a mode that has nothing to fold."""
    if mode == "adapter":
        raise MinbertError("--merge cannot fold Houlsby adapters: a nonlinearity sits between their two projections, "
                           "so they are no change of BERT's weights; they run at inference as they are (drop --merge)")
    if mode not in ADAPTER_MODES + ("prefix",):
        raise MinbertError(f"--merge folds LoRA/DoRA adapters into the weights (or a prefix's MLP into the prefix), "
                           f"but this model is {mode}: it needs --fine-tune-mode lora, dora or prefix")


def merge_for_inference(bert, merge, mode, log=print):
    """--merge, in every pipeline: fold what the mode allows before the final predictions."""
    if not merge:
        return
    check_merge(mode)
    if mode == "prefix":
        bert.prefix_tuning.fold()
        log("merged the prefix: its reparameterisation MLP is computed once and dropped")
    else:
        log(f"merged {merge_adapters(bert)} adapters into BERT's weights")


def prepare_backbone(bert, spec):
    """Set what of `bert` trains under spec.fine_tune_mode (a checkpoint.ModelSpec), adding the mode's new modules.
    Both pipelines call this. Returns the new modules (adapters, or the prefix)."""
    mode = spec.fine_tune_mode
    if mode in ADAPTER_MODES:
        hidden = bert.config.hidden_size  # every target linear has the hidden size on one side
        if spec.lora_rank > hidden:
            raise MinbertError(f"--lora_rank {spec.lora_rank}: above the hidden size {hidden} of {spec.pretrained}, where "
                               f"B A cannot have a higher rank than {hidden} and only adds parameters; at most "
                               f"--lora_rank {hidden} (full rank), or --fine-tune-mode full-model")
        return add_adapters(bert, spec.lora_targets, spec.lora_rank, spec.lora_alpha, spec.lora_dropout,
                            dora=mode == "dora")
    if mode == "adapter":
        return add_houlsby_adapters(bert, spec.adapter_dim)
    if mode == "prefix":
        bert.prefix_tuning = add_prefix(bert, spec.prefix_length)  # a submodule: saved, moved with the model
        return [bert.prefix_tuning]
    if mode not in FINE_TUNE_MODES:
        raise ValueError(f"unknown fine-tune mode {mode!r}; choose from {', '.join(FINE_TUNE_MODES)}")
    for p in bert.parameters():
        p.requires_grad = mode == "full-model"
    return []
