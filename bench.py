"""Throughput of our BertModel: the training step the default recipe runs, a plain training step (forward,
backward, AdamW step) and inference.

    python bench.py --pretrained all-minilm-l6-v2 --data sst --batch_size 32 --compare --hf
    python bench.py --pretrained all-minilm-l6-v2 --smart_weight 0 --rdrop_weight 1   # any recipe's step
    python bench.py --config base --data synthetic --seq_len 128
    python bench.py --pretrained all-minilm-l6-v2 --fine-tune-mode lora   # or dora, last-linear-layer; --pals

Rows: `recipe` trains Part 1's classifier with the regularisers the flags ask for, taken as the pipelines
take them (default: Part 2's default recipe, R-Drop on the full model); `plain` is the same step without
them. Both are the pipelines' own training step (minbert/training/step.py); on a GPU both are recorded as CUDA
graphs, as the pipelines run them there by default (minbert/training/recorded.py), on the fixed shapes of that
path, and `eager` is the plain step as --no_record_step runs it. `baseline`
(--compare) has every switch off (fp32, explicit attention, no bucketing, the reference optimizer loop); with
--hf, HF transformers' BertModel with SDPA attention on the same weights, on the same length-bucketed batches
as ours (`hf-bucketed`, what its Trainer's group_by_length gives), on batches in random order (`hf-random`,
its default, so that row's ratio includes bucketing's gain), in our reduced precision (`hf-amp`) and, on a
GPU, under torch.compile(mode="reduce-overhead") on our fixed shapes (`hf-compiled`, the one line its
documentation gives for speed). Each row also reports how long its first --warmup steps took (compiling and
recording happen there).

Reports non-pad and padded tokens/s, ms per step, achieved FLOP/s and MFU against the matmul peak measured on
the same device, with the same thread count, in the same run (the best of several timed matmuls after a
warm-up, with its spread; only for precisions the hardware runs natively, since an emulated bf16 peak is
meaningless), and peak memory (on a GPU the allocator's peak for each run; on the CPU the process's
resident-set high-water mark, which only grows across runs). Warm-up steps are excluded; every figure is the
median over --repeats rounds over the same batches; in each round every row in turn is built, warmed up, timed
and freed, one model resident at a time. --fine-tune-mode and --pals time our model the way those pipelines
train it (adapters or PALs, only trainable tensors in AdamW), with the optimizer state's measured size. The
measurements: minbert/bench/."""
import json

import torch

from config import SHAPES
from minbert.bench.run import benchmark
from minbert.flags.defaults import DEFAULT_REGULARIZERS
from minbert.flags.groups import add_regularizer_flags
from minbert.flags.rules import BENCH_IDLE, check_idle_flags
from minbert.flags.settings import bench_settings, parse_flags
from minbert.flags.types import nonneg_int, positive_int
from minbert.precision import AMP_CHOICES
from minbert.runs.outputs import check_file
from minbert.runs.publishing import write_output
from utils import Parser, main_guard


def build_parser():
    ap = Parser(prog="bench.py", description=__doc__)
    ap.add_argument("--pretrained", default=None, help="a checkpoint (default: random weights of --config)")
    ap.add_argument("--config", choices=sorted(SHAPES), default="minilm",
                    help="the shape of the random model when no --pretrained is given")
    ap.add_argument("--data", choices=["sst", "quora", "synthetic"], default="sst",
                    help="real training batches of a task, or random token ids of --seq_len")
    ap.add_argument("--data_dir", default="data", help="the folder of the course CSVs")
    ap.add_argument("--seq_len", type=positive_int, default=128, help="max_length (real data) "
                                                                      "or the length (synthetic)")
    ap.add_argument("--batch_size", type=positive_int, default=32, help="examples per step")
    ap.add_argument("--use_gpu", action="store_true", help="time the GPU")
    ap.add_argument("--amp", choices=AMP_CHOICES, default="auto",
                    help="auto: bf16/fp16 only where the hardware runs it natively, else fp32")
    ap.add_argument("--attn", choices=["sdpa", "explicit"], default="sdpa", help="attention path "
                                                                                 "of the fast runs")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model in the fast runs")
    ap.add_argument("--no_record_step", dest="record_step", action="store_false",
                    help="with --use_gpu, time our steps eagerly only (default: recorded as CUDA graphs, as "
                         "the pipelines run them on a GPU, with the eager step beside them)")
    ap.add_argument("--no_fused", dest="fused", action="store_false",
                    help="AdamW's multi-tensor kernels in the fast runs instead of its fused pass")
    ap.add_argument("--pad_multiple", type=nonneg_int, default=None, metavar="N",
                    help="pad bucketed batches to a multiple of N tokens, as "
                         "the pipelines do (default: 16 on a GPU, 0 on the CPU)")
    ap.add_argument("--steps", type=positive_int, default=20, help="timed batches per pass")
    ap.add_argument("--warmup", type=nonneg_int, default=3, help="untimed batches first")
    ap.add_argument("--repeats", type=positive_int, default=3, help="timed passes over the "
                                                                    "batches; the median counts")
    ap.add_argument("--threads", type=positive_int, default=None,
                    help="torch CPU threads for the model and the peak alike (default: torch's choice)")
    ap.add_argument("--peak_repeats", type=positive_int, default=10, help="timed matmuls per "
                                                                          "size for the peak")
    ap.add_argument("--compare", action="store_true", help="also run with every switch off and print ratios")
    ap.add_argument("--hf", nargs="?", const="all", default="", choices=["all", "best"],
                    help="also time HF transformers' BertModel on the same weights (needs transformers installed): "
                         "every row below, or with `--hf best` only its best setting (on a GPU hf-compiled, "
                         "else hf-amp in a reduced precision, else hf-bucketed)")
    ap.add_argument("--profile", type=nonneg_int, default=0, metavar="STEPS",
                    help="also profile this many plain training steps (with --hf and a reduced precision, "
                         "HF's too): the time by phase and by kind of operator; and the plain step's floor, "
                         "its matrix products and optimizer step alone (minbert/bench/floor.py)")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--fine-tune-mode", dest="fine_tune_mode", choices=["full-model", "last-linear-layer",
                                                                        "lora", "dora"],
                    default="full-model", help="what trains (adapters on query and "
                                               "value, as the pipelines' default)")
    ap.add_argument("--lora_rank", type=positive_int, default=8, help="the adapters' rank (lora, dora)")
    ap.add_argument("--pals", action="store_true", help="with one task's PALs beside every layer")
    add_regularizer_flags(ap.add_argument_group("regularisers, as the pipelines take them (default: Part 2's "
                                                "default recipe)"), DEFAULT_REGULARIZERS["multitask"])
    return ap


def main(argv=None):
    args = parse_flags(build_parser(), argv)
    check_idle_flags(vars(args), args.typed, BENCH_IDLE)
    if args.json:
        check_file(args.json, "--json")  # before the minutes of timing, not after them
    if args.threads:
        torch.set_num_threads(args.threads)
    settings, why = bench_settings(args)
    out = {"args": vars(args), **benchmark(settings, why)}
    if args.json:
        write_output(args.json, lambda fp: json.dump(out, fp, indent=2), "bench.py", mode="w")
        print(f"results written to {args.json}")


if __name__ == "__main__":
    main_guard(main)
