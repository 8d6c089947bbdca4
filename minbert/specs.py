"""The settings the library receives: frozen dataclasses, built once from the flags
(minbert/flags/settings.py) and passed down, each holding what its consumer needs.

    ModelSpec     a pipeline model's architecture; every checkpoint carries it, so that a saved model
                  can be rebuilt from the file alone
    Recipe        the optimisation: optimizer, learning rates, schedule, clipping, freezing, gradient surgery
    TaskLosses    Part 2's task weights, similarity and embedding losses, distillation
    Runtime       where and how fast: the device, the precision, the attention path, fixed shapes, the
                  training step eager or recorded (never what is computed)
    RunSpec       where a run writes, whether it resumes, and the flags that define it
and one object per pipeline bundling them (ClassifierSettings, MultitaskSettings, PretrainSettings, Build
GPT-2's SonnetSettings). The regularisers' settings are objectives/regularizers.py's Regularizers, one field
per flag of its table, so that a new regulariser is its module and one row there.

A test builds `Recipe(lr=1e-3)` in one line; a pipeline without gradient surgery keeps Recipe's default.
"""
from dataclasses import asdict, dataclass, field, fields
from typing import Mapping, Optional

import torch

from minbert.cli import MinbertError
from minbert.course_data import DATA_DIR
from minbert.files import plain


# Tokens per input by default, per pipeline (ModelSpec.pipeline): Part 1 takes whole reviews (CFIMDB's are
# long), Part 2 and pretrain.py's sentences 128, GPT-2's scripts up to their model's positions. The scripts'
# --max_length defaults are these, and a ModelSpec built without one takes its pipeline's.
MAX_LENGTH = {"classifier": 512, "multitask": 128, "pretrain": 128, "gpt2-classifier": 512,
              "gpt2-paraphrase": 512, "gpt2-sonnet": 1024}


@dataclass(frozen=True)
class ModelSpec:
    """A pipeline model's architecture: the values that decide its parameters and what its forward does.
    Part 1 (classifier) uses the first block; Part 2 (multitask) all but num_labels."""
    pipeline: str = "multitask"
    pretrained: str = "bert-base-uncased"
    fine_tune_mode: str = "full-model"
    lora_rank: int = 8
    lora_alpha: float = 16.0
    lora_dropout: float = 0.0
    lora_targets: tuple = None           # default: ("query", "value")
    dropout: tuple = None                # head dropout: one value (Part 1), or SST, Quora, STS (Part 2)
    max_length: int = None               # how inputs were tokenized (default: MAX_LENGTH[pipeline])
    num_labels: int = 5                  # Part 1: 5 (SST) or 2 (CFIMDB)
    pair_encoding: str = "cross"         # Part 2 from here on
    pooling: str = "mean"
    pals: bool = False
    pals_dim: int = None
    siamese_proj: int = 0
    adapter_dim: int = 64                # --fine-tune-mode adapter (finetuning/houlsby.py)
    prefix_length: int = 10              # --fine-tune-mode prefix (finetuning/prefix.py)
    shared_head: int = 0                 # a hidden layer the task heads share (0: none)
    extra_tasks: tuple = None            # --extra_task's data sets, each with a head (tasks/extra.py)

    def __post_init__(self):
        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731 (frozen: set once, here)
        set_("lora_targets", tuple(self.lora_targets or ("query", "value")))
        set_("extra_tasks", tuple(self.extra_tasks or ()))
        set_("dropout", tuple(float(d) for d in (self.dropout if self.dropout is not None else [0.1])))
        if self.max_length is None:
            set_("max_length", MAX_LENGTH[self.pipeline])

    def to_dict(self):
        return plain(asdict(self))

    @classmethod
    def from_dict(cls, d, source="checkpoint"):
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise MinbertError(f"{source}: the model spec has fields this minbert does not know "
                               f"({', '.join(unknown)}); it was written by a newer version")
        return cls(**d)

    def differences(self, given):
        """[(field, saved value, given value)] for the fields in `given` ({field: value}) that differ."""
        return [(k, getattr(self, k), v) for k, v in given.items() if plain(getattr(self, k)) != plain(v)]


@dataclass(frozen=True)
class Recipe:
    """The optimisation a run takes (training/trainer.py build_trainer, training/fit.py), and the smoothing of
    its classification targets (objectives/losses.py)."""
    lr: float
    epochs: int = 10
    optimizer: str = "adamw"             # adamw, lion or lamb (optimizer.py)
    weight_decay: float = 0.0
    llrd: float = 1.0                    # layer-wise learning-rate decay (training/schedule.py)
    head_lr: Optional[float] = None      # the heads' rate (default lr)
    scheduler: str = "linear"
    warmup_ratio: float = 0.1
    max_grad_norm: float = 0.0           # 0: no clipping
    grad_accum: int = 1
    foreach: bool = True                 # AdamW's multi-tensor kernels (False: the reference loop)
    fused: bool = True                   # AdamW's fused pass over each tensor (False: one kernel per line)
    freeze_layers: int = 0               # finetuning/freezing.py
    gradual_unfreeze: int = 0
    surgery: Optional[str] = None        # "pcgrad" or "gradvac": combine the task gradients of a step
    gradvac_beta: float = 1e-2
    patience: int = 0                    # early stopping (0: never)
    label_smoothing: float = 0.0         # of the classification losses' targets (0: the one-hot labels)
    seed: int = 11711
    lr_why: str = ""                     # why this learning rate (the start line says it)


@dataclass(frozen=True)
class TaskLosses:
    """Part 2's training loss (objectives/losses.py MultitaskLoss): each task's weight, --sts_loss, the
    sentence-embedding terms and distillation's weight and temperature."""
    weights: Mapping = field(default_factory=lambda: {"sst": 1.0, "quora": 1.0, "sts": 1.0})
    sts_loss: str = "mse"
    mnrl_weight: float = 0.0
    mnrl_scale: float = 20.0
    simcse_weight: float = 0.0
    distill_weight: float = 0.5
    distill_temperature: float = 2.0


@dataclass(frozen=True)
class Runtime:
    """Where and how fast a run computes; what it computes does not depend on these (beyond
    rounding), so a run may resume with other values. amp and pad_multiple are resolved for the
    device ('auto' and None are gone)."""
    device: torch.device = torch.device("cpu")
    amp: str = "none"                    # none, bf16 or fp16 (precision.py)
    attn: str = "sdpa"
    # pad batches to a multiple of this many tokens (0: to the longest row)
    pad_multiple: int = 0
    compile: bool = False
    fast_dropout: bool = True            # dropout's masks drawn in bulk on the CPU (minbert/dropout.py)
    tensorboard: bool = True
    # the training step recorded as one CUDA graph per batch shape and replayed (training/recorded.py)
    record_step: bool = False


@dataclass(frozen=True)
class RunSpec:
    """Where a run writes (runs/folders.py) and which flags define it (runs/identity.py)."""
    name: str = ""                       # --run_name (under runs/)
    dir: Optional[str] = None            # --run_dir (anywhere)
    resume: bool = False
    # --backup: a file no run wrote may be replaced, kept as NAME.DATE.bak
    backup: bool = False
    stem: Optional[str] = None           # the best checkpoint's file stem (Part 2's --checkpoint PATH)
    flags: Mapping = field(default_factory=dict)  # the run-defining flags, as plain values
    # the flags typed (argparse destinations): a message names an output after its flag only when it is here
    # (runs/outputs.py); an output at its default is named by its path, the flag offered to write elsewhere
    typed: frozenset = frozenset()


# ----------------------------------------------------------------------------- one object per pipeline

@dataclass(frozen=True)
class ClassifierSettings:
    """Part 1 (classifier.py): one model per --datasets entry; `model.num_labels` is set per dataset."""
    model: ModelSpec
    recipe: Recipe
    regularizers: object = None          # objectives/regularizers.Regularizers (None: none)
    runtime: Runtime = Runtime()
    run: RunSpec = RunSpec()
    datasets: tuple = ("sst", "cfimdb")
    data_dir: str = DATA_DIR
    batch_size: int = 8
    bucket: bool = True                  # length-bucketed batches (--no_bucket: plain shuffled order)
    predictions_dir: str = "predictions"
    merge: bool = False
    # {(dataset, split): path} copied there, not into predictions_dir (--para_dev_out)
    published: Mapping = None


@dataclass(frozen=True)
class MultitaskData:
    """Part 2's data: the CSVs ({task: {split: path}}), --extra_task's files, how batches are drawn."""
    paths: Mapping
    extra: tuple = ()                    # ((name, path), ...)
    batch_size: int = 32
    bucket: bool = ClassifierSettings.bucket
    sampler: str = "annealed"            # annealed, proportional, round-robin, all, or sequential
    steps_per_epoch: Optional[int] = None
    fold: Optional[tuple] = None         # (I, K): train without fold I of K
    distill: Optional[str] = None        # soft-targets.npz of ensemble.py --soft_targets


@dataclass(frozen=True)
class MultitaskSettings:
    """Part 2 (multitask_classifier.py): training, or with `eval_only` re-scoring a saved model."""
    model: ModelSpec
    recipe: Recipe
    data: MultitaskData
    losses: TaskLosses = TaskLosses()
    regularizers: object = None          # objectives/regularizers.Regularizers (None: none)
    runtime: Runtime = Runtime()
    run: RunSpec = RunSpec()
    published: Mapping = field(default_factory=dict)  # {(task, split): the leaderboard path it is copied to}
    results: str = "predictions/multitask-results.csv"
    # --results typed: a --resume of a finished run whose row went to another table is refused (it adds no
    # row there) only then; with the default, the project may have moved since the run finished
    results_given: bool = False
    merge: bool = ClassifierSettings.merge
    eval_only: Optional[str] = None      # a checkpoint to re-score instead of training
    # --eval_only: architecture flags typed ({spec field: value})
    given: Mapping = field(default_factory=dict)
    # --eval_only: --max_length typed (tokenize at it, not the checkpoint's)
    max_length_given: bool = False


@dataclass(frozen=True)
class PretrainSettings:
    """pretrain.py: masked-LM (and, with `nsp` above 0, next-sentence) pretraining of `pretrained` on the task
    text (or --texts), written to `out`."""
    pretrained: str
    out: str
    recipe: Recipe
    runtime: Runtime = Runtime()
    run: RunSpec = RunSpec()
    data_dir: str = ClassifierSettings.data_dir
    texts: Optional[str] = None
    max_length: int = MAX_LENGTH["pretrain"]
    batch_size: int = 32
    mask_prob: float = 0.15
    max_steps: int = 0                   # 0: no limit
    bucket: bool = ClassifierSettings.bucket
    corpus: str = "tasks"                # the text without --texts: tasks, cfimdb or sonnets
    nsp: float = 0.0                     # next-sentence prediction's loss weight (0: off)


@dataclass(frozen=True)
class EnsembleSettings:
    """ensemble.py: K multitask models (checkpoints, or folders of their six prediction files) averaged."""
    members: tuple
    runtime: Runtime = Runtime()
    run: RunSpec = RunSpec()
    data_dir: str = ClassifierSettings.data_dir
    out: str = ClassifierSettings.predictions_dir
    batch_size: int = 64
    soft_targets: bool = False           # also the members' outputs on the training sets, for --distill
    in_sample: bool = False              # with --fold members: every member on every example (the ablation)


@dataclass(frozen=True)
class SweepSettings:
    """sweep.py: an Optuna study over a pipeline's flags (sweeps/)."""
    pipeline: str                        # classifier or multitask
    space: tuple                         # --space items as typed, FLAG=SPEC
    base: tuple = ()                     # the flags after --, passed to every trial
    command: tuple = ()                  # the sweep's own command line (for the line that continues it)
    trials: int = 8
    seeds: tuple = (Recipe.seed,)
    sampler: str = "tpe"
    sampler_seed: Optional[int] = None
    study: Optional[str] = None
    storage: Optional[str] = None
    prune: bool = True
    prune_startup: int = 2
    prune_warmup: int = 0
    baseline: tuple = ()                 # run folders the winning trial is compared with (reports/compare.py)


@dataclass(frozen=True)
class BenchSettings:
    """bench.py: what is timed (the model, the batches, what trains, the recipe's regularisers) and against what."""
    runtime: Runtime
    regularizers: object = None          # objectives/regularizers.Regularizers (None: none)
    pretrained: Optional[str] = None     # a checkpoint, or None for random weights of `config`
    config: str = "minilm"
    data: str = "sst"                    # sst, quora (real training batches) or synthetic
    data_dir: str = ClassifierSettings.data_dir
    seq_len: int = MAX_LENGTH["multitask"]
    batch_size: int = MultitaskData.batch_size  # Part 2's step, the default recipe's
    steps: int = 20
    warmup: int = 3
    repeats: int = 3
    peak_repeats: int = 10
    fine_tune_mode: str = ModelSpec.fine_tune_mode
    lora_rank: int = ModelSpec.lora_rank
    pals: bool = ModelSpec.pals
    # AdamW's fused pass in the fast rows (False: its multi-tensor kernels)
    fused: bool = Recipe.fused
    compare: bool = False                # also every switch off
    # profile this many plain training steps (and HF's in the same precision)
    profile: int = 0
    hf: str = ""                         # also HF transformers: "all" its rows, "best" its fastest setting only


# Build GPT-2's scripts run from gpt2/, beside the project's data/.
GPT2_DATA = "../data"


@dataclass(frozen=True)
class SonnetSettings:
    """Build GPT-2's sonnet_generation.py (gpt2/sonnet_pipeline.py): the model, recipe, runtime and run folder of
    the shared library, the sonnet files, and how completions are decoded."""
    model: ModelSpec
    recipe: Recipe
    runtime: Runtime
    run: RunSpec
    # the files, each field named as its flag (--sonnet_path, ...)
    sonnet_path: str = f"{GPT2_DATA}/sonnets.txt"
    held_out_sonnet_path: str = f"{GPT2_DATA}/sonnets_held_out.txt"
    held_out_dev_path: str = f"{GPT2_DATA}/sonnets_held_out_dev.txt"
    true_dev_path: str = f"{GPT2_DATA}/TRUE_sonnets_held_out_dev.txt"
    sonnet_out: str = "predictions/generated_sonnets.txt"
    batch_size: int = ClassifierSettings.batch_size
    bucket: bool = ClassifierSettings.bucket
    decoding: str = "sample"  # sample (temperature, top-p), greedy, or beam
    temperature: float = 1.2
    top_p: float = 0.9
    num_beams: int = 4
    length_penalty: float = 1.0
    no_repeat_ngram_size: int = 0
    early_stopping: object = False  # False, True or "never": HF's rules (gpt2/generation.py)
    max_line_tokens: int = 24
