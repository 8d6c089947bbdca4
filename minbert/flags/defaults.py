"""The defaults that are decisions: the recipe measured best (RESULTS.md) against the handout's
plain values, and the learning-rate default, which depends on what trains, how wide the checkpoint
is and which optimizer steps."""
from minbert.finetuning.modes import ADAPTER_LR, MODES, NEW_WEIGHTS_LR_MODES
from minbert.objectives.regularizers import REGULARIZERS
from minbert.training.recorded import cannot_record
from optimizer import LR_FACTOR

# The regularisers' weights (objectives/regularizers.py), each the flag that switches one on.
REGULARIZER_WEIGHTS = tuple(r.weight for r in REGULARIZERS.values())
# The handout's plain training: a constant learning rate, no warm-up, no clipping, no regulariser.
HANDOUT_RECIPE = {"scheduler": "constant", "warmup_ratio": 0.0, "max_grad_norm": 0.0,
                  **{weight: 0.0 for weight in REGULARIZER_WEIGHTS}}
# full-model's default learning rate: the best measured on MiniLM (RESULTS.md), and the handout's.
FULL_MODEL_LR = {"best": 1e-4, "handout": 1e-5}
# The handout's dropout before a classifier head (Part 1's default; Part 2's with --recipe handout).
HANDOUT_DROPOUT = 0.3
# Build GPT-2's handout's rate for the whole model; the rest of the rule is minBERT's.
GPT2_FULL_MODEL_LR = 1e-5
# Part 2's handout defaults, for --recipe handout, the plain training among them (ours are the recipe measured
# best on MiniLM, see RESULTS.md).
MULTITASK_HANDOUT = {**HANDOUT_RECIPE, "fine_tune_mode": "last-linear-layer", "batch_size": 8,
                     "hidden_dropout_prob": HANDOUT_DROPOUT, "lr": FULL_MODEL_LR["handout"]}

# The regularisers of the default recipe, per pipeline: the rows measured best in RESULTS.md ("The
# regularisers: which mechanism helps"), each regulariser's row saying its own. Part 1 applies them to
# full-model only: they need BERT in the graph, and last-linear-layer trains on cached features.
DEFAULT_REGULARIZERS = {pipeline: {r.weight: r.defaults[pipeline] for r in REGULARIZERS.values()}
                        for pipeline in ("classifier", "multitask")}

# pretrain.py's recipe, where it is not the fine-tuning one: RoBERTa's and BERT's pretraining values scaled to a
# short further pretraining (Liu et al. 2019, table 9: warm-up 6%, weight decay 0.01, clipping at 1).
PRETRAIN_RECIPE = {"lr": 5e-5, "epochs": 3, "weight_decay": 0.01, "warmup_ratio": 0.06, "max_grad_norm": 1.0}

# For checkpoints as wide as bert-base or wider, fine-tuning the whole model: the middle of the range the BERT
# paper gives (Devlin et al. 2019, appendix A.3: 2e-5 to 5e-5); 1e-4 was measured on the 384-wide MiniLM only.
WIDE, WIDE_LR = 768, 3e-5


def resolve_lr(lr, fine_tune_mode, optimizer, hidden_size, full_model=None):
    """(the learning rate, the reason the start line gives): `lr` when given, else the default for what trains
    (finetuning/modes.py), how wide the checkpoint is and which optimizer steps (optimizer.LR_FACTOR). One rule
    for both projects: `full_model`, (lr, why), is the whole model's default AdamW rate where a project's
    handout sets its own (Build GPT-2's 1e-5), in place of the one by width."""
    if lr is not None:
        return lr, f"lr {lr:g}"
    # adapters, heads on a frozen BERT (with or without PALs): the new weights' rate (finetuning/modes.py)
    mode = MODES[fine_tune_mode]
    if mode.new_weights_lr:
        lr = ADAPTER_LR
        why = (f"lr {ADAPTER_LR:g} (default for --fine-tune-mode {fine_tune_mode}"
               + (", where only new weights train: adapters, PALs or heads)" if mode.frozen_backbone else ")"))
    elif full_model is not None:
        lr, why = full_model
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


def lr_help(modes, gpt2=False):
    """--lr's help: resolve_lr's rule in words, for a script taking `modes` (Build GPT-2's: `gpt2`)."""
    def rate(lr):  # as people write it: 1e-3, 3e-5
        return f"{lr:.0e}".replace("e-0", "e-")
    new = ", ".join(m for m in NEW_WEIGHTS_LR_MODES if m in modes)
    head = f"default {rate(ADAPTER_LR)} for {new} (only new weights train); " if new else "default "
    if gpt2:
        full = f"{rate(GPT2_FULL_MODEL_LR)} for full-model (the GPT-2 handout's)"
    else:
        full = (f"{rate(FULL_MODEL_LR['best'])} for full-model below hidden size {WIDE}, {rate(WIDE_LR)} from "
                f"{WIDE} up (--recipe handout: {rate(FULL_MODEL_LR['handout'])})")
    factors = "; ".join(f"--optimizer {name} takes {why.split(': ', 1)[1]}"  # "Lion: a third of AdamW's"
                        for name, (factor, why) in LR_FACTOR.items() if factor != 1.0)
    return f"{head}{full}; {factors}"


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
