"""The defaults that are decisions: the recipe measured best (RESULTS.md) against the handout's
plain values, and the learning-rate default, which depends on what trains, how wide the checkpoint
is and which optimizer steps."""
from minbert.finetuning.modes import ADAPTER_LR, MODES
from optimizer import LR_FACTOR

# The handout's plain training: a constant learning rate, no warm-up, no clipping, no regulariser.
HANDOUT_RECIPE = {"scheduler": "constant", "warmup_ratio": 0.0, "max_grad_norm": 0.0, "smart_weight": 0.0,
                  "rdrop_weight": 0.0, "smart_bregman_weight": 0.0}
# Part 2's handout defaults, for --recipe handout (ours are the recipe measured
# best on MiniLM, see RESULTS.md).
MULTITASK_HANDOUT = {"fine_tune_mode": "last-linear-layer", "batch_size": 8, "hidden_dropout_prob": 0.3,
                     "lr": 1e-5}

# The regularisers of the default recipe, per pipeline: the rows measured best in RESULTS.md ("The
# regularisers: which mechanism helps"). Part 1 applies them to full-model only: they need BERT in the graph,
# and last-linear-layer trains on cached features.
DEFAULT_REGULARIZERS = {
    "classifier": {"rdrop_weight": 0.0, "smart_weight": 0.0},
    "multitask": {"rdrop_weight": 2.0, "smart_weight": 0.0},
}
REGULARIZER_WEIGHTS = ("rdrop_weight", "smart_weight")

# full-model's default learning rate: the best measured on MiniLM (RESULTS.md), and the handout's.
FULL_MODEL_LR = {"best": 1e-4, "handout": 1e-5}
# For checkpoints as wide as bert-base or wider, fine-tuning the whole model: the middle of the range the BERT
# paper gives (Devlin et al. 2019, appendix A.3: 2e-5 to 5e-5); 1e-4 was measured on the 384-wide MiniLM only.
WIDE, WIDE_LR = 768, 3e-5


def resolve_lr(lr, fine_tune_mode, optimizer, hidden_size):
    """(the learning rate, the reason the start line gives): `lr` when given, else the default for what trains
    (finetuning/modes.py), how wide the checkpoint is and which optimizer steps (optimizer.LR_FACTOR)."""
    if lr is not None:
        return lr, f"lr {lr:g}"
    # adapters, heads on a frozen BERT (with or without PALs): new weights only
    if MODES[fine_tune_mode].new_weights:
        lr = ADAPTER_LR
        why = f"lr {ADAPTER_LR:g} (default when only new weights train: adapters, PALs or heads)"
    elif hidden_size >= WIDE:
        lr, why = WIDE_LR, (f"lr {WIDE_LR:g} (default for a checkpoint of hidden size {hidden_size} >= "
                            f"{WIDE}: the middle of the BERT paper's fine-tuning range 2e-5 to 5e-5; 1e-4 "
                            "was measured best on the 384-wide MiniLM only)")
    else:
        lr = FULL_MODEL_LR["best"]
        why = (f"lr {lr:g} (default for a checkpoint of hidden size {hidden_size} < {WIDE}: the best "
               "measured on the 384-wide MiniLM, see RESULTS.md)")
    factor, reason = LR_FACTOR[optimizer]
    if factor != 1.0:
        adamw, lr = lr, lr * factor
        why = why.replace(f"lr {adamw:g} (", f"lr {lr:g} ({reason}, whose ", 1)
    return lr, why


def eager_reasons(v, amp, world):
    """Why a run's training step cannot be recorded as CUDA graphs (training/graphs.py), from its parsed flags
    `v`, its resolved precision and its number of processes: [] when it can."""
    why = []
    if world > 1:
        why.append(f"{world} processes: DistributedDataParallel reduces the gradients outside the step")
    if amp == "fp16":
        why.append("fp16's loss scaler reads every step's gradients back to skip the steps that overflow")
    if v.get("grad_accum", 1) > 1:
        why.append("--grad_accum steps the optimizer every few batches")
    if v.get("pcgrad") or v.get("gradvac"):
        why.append("--pcgrad and --gradvac combine the task gradients on the host")
    if v.get("sampler") == "all":
        why.append("--sampler all puts a batch of every task in each step")
    if v.get("gradual_unfreeze"):
        why.append("--gradual_unfreeze changes which parameters train during the run")
    if v.get("compile"):
        why.append("--compile compiles the forward on its own (the recorded step is not measured with a "
                   "compiled forward inside it)")
    if v.get("optimizer", "adamw") != "adamw":
        why.append(f"--optimizer {v['optimizer']} reads its learning rate "
                   "as a number (only AdamW's step takes it from the device)")
    return why


def resolve_graphs(v, device, amp, world, eager=None):
    """(whether the training step is recorded as CUDA graphs, the start line's reason): with
    --use_gpu on a GPU unless --no_cuda_graphs or the run needs the eager step (eager_reasons, or
    the pipeline's own `eager`)."""
    if device.type != "cuda":
        return False, f"eager (CUDA graphs need a GPU; {device.type} runs the step as it comes)"
    if not v.get("cuda_graphs", True):
        return False, "eager (--no_cuda_graphs)"
    why = eager_reasons(v, amp, world) + ([eager] if eager else [])
    if why:
        return False, "eager (" + "; ".join(why) + ")"
    return True, ("one CUDA graph per batch shape, recorded once and replayed (forward, backward, clipping, "
                  "AdamW and the schedule; --no_cuda_graphs runs it eagerly)")
