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

# first, before torch loads: a Ctrl-C meanwhile is one line (minbert/cli.py)
from minbert.cli import main_guard

import torch

from minbert.bench.run import benchmark
from minbert.flag import BENCH
from minbert.flags import parsers
from minbert.flags.settings import bench_settings, values
from minbert.flags.typed import check_idle_flags, parse_flags
from minbert.runs.outputs import check_file
from minbert.runs.publishing import write_output


def build_parser():
    return parsers.parser(BENCH, prog="bench.py", description=__doc__)


def main(argv=None):
    args = parse_flags(build_parser(), argv)
    check_idle_flags(values(args, BENCH), args.typed, parsers.idle_rules(BENCH))
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
