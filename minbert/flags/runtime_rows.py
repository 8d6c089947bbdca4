"""The flags of how a run computes and where its files go: precision, attention, padding, batching order,
gradient accumulation, the fast paths, compiling and recording the step (mostly specs.Runtime), and the run
folder (specs.RunSpec); one row each (flag.Flag), listed with the others in flags/table.py. Which of them define
a run and which only change its speed or where its files go: runs/identity.py RUN_FREE."""
import argparse

from minbert.flag import ALL, BERT, G1, GP, GPT2, GS, INFERENCE, P1, P2, PRE, TRAINING, Flag, Per, default
from minbert.flags.groups import BACKUP_HELP, RunFolder
from minbert.flags.rules import FOREACH, FUSED, RECORD_STEP, not_frozen_head
from minbert.precision import AMP_CHOICES
from minbert.specs import ClassifierSettings, Recipe, RunSpec, Runtime

SPEED, RUN = "speed", "run folder"
RUN_NAME_HELP = "the run's folder under runs/ (default: {}-TIMESTAMP); an existing one is refused unless --resume"


def speed_rows():
    """The speed flags' rows, in --help's order: the training scripts', bench.py's and ensemble.py's (those that
    act where nothing trains)."""
    F = Flag
    return [
        F("amp", "auto", AMP_CHOICES,
          Per("mixed precision. auto (default): bf16 where the hardware runs it natively (recent GPUs, CPUs with "
              "AMX or AVX512-BF16), fp16 with a grad scaler on older GPUs, fp32 otherwise",
              bench="auto: bf16/fp16 only where the hardware runs it natively, else fp32"),
          scripts=ALL | INFERENCE, group=Per(SPEED, bench=None)),
        F("attn", default(Runtime, "attn"), ("sdpa", "explicit"),
          Per("attention path", bench="attention path of the fast runs"), scripts=ALL | INFERENCE,
          group=Per(SPEED, bench=None)),
        F("pad_multiple", None, "nonneg_int",
          Per("pad each batch to a multiple of N tokens, so that a few fixed shapes recur (default: 16 on a GPU, 0 = "
              "to the batch's longest row on the CPU, where padding costs compute)",
              bench="pad bucketed batches to a multiple of N tokens, as the pipelines do (default: 16 on a GPU, 0 "
                    "on the CPU)"), metavar="N", scripts=ALL | INFERENCE, group=Per(SPEED, bench=None)),
        F("bucket", default(ClassifierSettings, "bucket"), "off",
          "batch in plain shuffled order (default: length-bucketed batches)", scripts=TRAINING | {PRE}, group=SPEED),
        F("foreach", default(Recipe, "foreach"), "off",
          "AdamW's reference loop, Algorithm 1 line by line one tensor at a time (default: one fused pass over "
          "each tensor)", scripts=TRAINING | {PRE}, group=SPEED, idle=Per(FOREACH, pretrain=None)),
        F("fused", default(Recipe, "fused"), "off",
          Per("AdamW as one multi-tensor kernel per line of Algorithm 1 instead of one fused pass over each tensor "
              "(the same arithmetic)",
              bench="AdamW's multi-tensor kernels in the fast runs instead of its fused pass"),
          scripts=ALL, group=Per(SPEED, bench=None), idle=Per(FUSED, pretrain=None, bench=None)),
        F("fast_dropout", default(Runtime, "fast_dropout"), "off",
          "torch's dropout, one random draw per element (default: masks drawn in bulk on the CPU, "
          "minbert/dropout.py; a GPU always uses torch's)",
          scripts=BERT | {PRE}, group=SPEED,
          not_gpt2="switches off minBERT's bulk dropout masks, which GPT-2 does not use (its dropout is torch's)"),
        F("compile", default(Runtime, "compile"), "switch",
          Per("torch.compile the model (Inductor's fused kernels); on a GPU inside the recorded step, AdamW's "
              "update compiled too: fastest for long runs, after about 100 s of compiling",
              bench="torch.compile the model in the fast runs"), scripts=ALL, group=Per(SPEED, bench=None),
          idle=Per(None, classifier=not_frozen_head("compiles BERT's forward, which --fine-tune-mode "
                                                     "last-linear-layer runs once to cache its features"),
                   gpt2_classifier=not_frozen_head("compiles GPT-2's forward, which --fine-tune-mode "
                                                    "last-linear-layer runs once to cache its features"))),
        F("record_step", True, "off",
          Per("with --use_gpu, run the training step eagerly, kernel by kernel (default on a GPU: the whole step, "
              "forward to optimizer, recorded once per batch shape as a CUDA graph and replayed, 3-7x faster on "
              "an H100; minbert/training/recorded.py)",
              bench="with --use_gpu, time our steps eagerly only (default: recorded as CUDA graphs, as the "
                    "pipelines run them on a GPU, with the eager step beside them)"),
          scripts=ALL, group=Per(SPEED, bench=None), idle=RECORD_STEP),
        F("grad_accum", default(Recipe, "grad_accum"), "positive_int", "accumulate gradients over this many batches",
          scripts=TRAINING | {PRE}, group=SPEED),
    ]


def run_rows():
    """The run folder's rows, in --help's order, the earlier spellings last."""
    F = Flag
    return [
        F("run_name", default(RunSpec, "name"), None,
          Per(RUN_NAME_HELP.format(P2), **{k.replace("-", "_"): RUN_NAME_HELP.format(k) for k in (P1, G1, GP, GS)}),
          scripts=TRAINING, group=RUN, action=RunFolder),
        F("run_dir", default(RunSpec, "dir"), None,
          "the run's folder anywhere (instead of runs/RUN_NAME): checkpoints, log and predictions",
          scripts=TRAINING, group=RUN, action=RunFolder),
        F("resume", default(RunSpec, "resume"), "switch",
          Per("continue from the last completed epoch (of --run_name / --run_dir, else the newest run)",
              pretrain="continue the run saved in --out"), scripts=TRAINING | {PRE}, group=Per(RUN, pretrain=None)),
        F("backup", default(RunSpec, "backup"), "switch", BACKUP_HELP, scripts=TRAINING, group=RUN),
        F("tensorboard", default(Runtime, "tensorboard"), "off",
          "write no TensorBoard event files into the run folder (default: written, minbert/training/monitor.py)",
          scripts=TRAINING | {PRE}, group=Per(RUN, pretrain=None)),
        # the earlier spellings of the run folder, hidden from --help
        F("run_dir", None, None, argparse.SUPPRESS, name="--checkpoint_dir", scripts=frozenset({P1, *GPT2}),
          group=RUN, action=RunFolder),
        F("run_dir", None, None, argparse.SUPPRESS, name="--checkpoint", scripts=frozenset({P2}), group=RUN,
          action=RunFolder),
    ]
