"""An independent check of bench.py's training-step timings: its own batches, its own timing loop and its
own CUDA graph capture, nothing from minbert/bench/ or minbert/training/, so that a figure both agree on is
not an artefact of one harness.

    python tools/step_timing.py --config base --seq_len 128 --batch_size 32 --use_gpu --json step_timing.json
    python bench.py --config base --data synthetic --seq_len 128 --batch_size 32 --use_gpu --hf  # the same

Rows (ms per training step: forward, cross-entropy on the pooled [CLS], backward, AdamW; every batch B x T
random token ids, no padding, fixed like bench.py's --data synthetic):
  ours         our BertModel and our AdamW (its fused pass), eagerly
  ours-inductor-graph  the same recorded step with our model's forward compiled by torch.compile's default mode
               first (Inductor's fused kernels, no CUDA graphs of its own) and AdamW's update compiled, then
               recorded: bench.py --use_gpu --compile's step (GPU only)
  ours-graph   the same step recorded once with torch.cuda.graph and replayed (GPU only): static inputs,
               gradients created and dropped inside the graph (temporaries of its pool), AdamW capturable with its
               learning rate a device tensor
  hf           HF transformers' BertModel with SDPA attention and torch's fused AdamW, eagerly
  hf-compiled  the same under torch.compile(mode="reduce-overhead") (GPU only)
Timing: --warmup untimed steps, then --steps timed ones between two CUDA events (perf_counter on the CPU), the
median of --repeats such passes.
"""
import json
import statistics
import sys
import time
from pathlib import Path

if not __package__:  # run as a file (python tools/NAME.py): the project folder first, not tools/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# first, before torch loads: a Ctrl-C meanwhile is one line (minbert/cli.py)
from minbert.cli import Parser, main_guard  # noqa: E402

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
import transformers  # noqa: E402

from bert import BertModel  # noqa: E402
from config import BertConfig  # noqa: E402
from minbert.hub import resolve_pretrained  # noqa: E402
from minbert.runs.outputs import check_file  # noqa: E402
from minbert.runs.publishing import write_output  # noqa: E402
from optimizer import AdamW  # noqa: E402

SHAPES = {"base": {}, "minilm": dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                                     intermediate_size=1536),
          "tiny": dict(hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512)}


ROWS = ("ours", "ours-graph", "ours-inductor-graph", "hf", "hf-compiled")
GRAPH_ROWS = ("ours-graph", "ours-inductor-graph")  # recorded by hand below
GPU_ROWS = (*GRAPH_ROWS, "hf-compiled")


def build(args, hf, device):
    """(encoder returning the pooled [CLS], classification head, every trainable parameter)."""
    torch.manual_seed(0)
    if hf:
        if args.pretrained:
            enc = transformers.BertModel.from_pretrained(str(resolve_pretrained(args.pretrained).folder),
                                                         attn_implementation="sdpa").float()
        else:
            enc = transformers.BertModel(transformers.BertConfig(**SHAPES[args.config],
                                                                 attn_implementation="sdpa"))
    elif args.pretrained:
        enc = BertModel.from_pretrained(args.pretrained)
    else:
        enc = BertModel(BertConfig(**SHAPES[args.config]))
    head = torch.nn.Sequential(torch.nn.Dropout(0.3), torch.nn.Linear(enc.config.hidden_size, 5))
    enc.to(device).train()
    head.to(device).train()
    return enc, head, [p for p in [*enc.parameters(), *head.parameters()] if p.requires_grad]


def pooled(enc, hf, ids, mask):
    out = enc(input_ids=ids, attention_mask=mask)
    return out.pooler_output if hf else out["pooler_output"]


def model_config(args):
    """The timed model's config: the checkpoint's, or the random --config shape's."""
    return (BertConfig.from_json_file(resolve_pretrained(args.pretrained).require("config").config)
            if args.pretrained else BertConfig(**SHAPES[args.config]))


def random_ids(args, generator, cls=False):
    """[batch, seq_len] token ids in the middle of the model's vocabulary (bert-base's ids 1000 to 20000, or that
    share of a smaller one: a checkpoint of its own may have a few hundred); with `cls`, [CLS] (101) first."""
    vocab = model_config(args).vocab_size
    low, high = min(1000, vocab // 30), min(20000, vocab)
    ids = torch.randint(low, high, (args.batch_size, args.seq_len), generator=generator)
    if cls:
        ids[:, 0] = min(101, vocab - 1)
    return ids


def step_function(args, row, device, amp):
    """(step(ids, mask, labels), seconds spent compiling or recording before timing can start)."""
    hf = row.startswith("hf")
    enc, head, params = build(args, hf, device)
    if row == "hf-compiled":
        enc = torch.compile(enc, mode="reduce-overhead")
    elif row == "ours-inductor-graph":
        enc = torch.compile(enc)  # fused kernels only: the recording below is the one CUDA graph
    fused = device.type in ("cuda", "cpu")
    opt = torch.optim.AdamW(params, lr=1e-5, fused=fused) if hf else AdamW(params, lr=1e-5)

    def loss_of(ids, mask, labels):
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            return F.cross_entropy(head(pooled(enc, hf, ids, mask)), labels)

    def eager(ids, mask, labels):
        if row == "hf-compiled":
            torch.compiler.cudagraph_mark_step_begin()
        loss_of(ids, mask, labels).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    if row not in GRAPH_ROWS:
        return eager, 0.0
    # torch.cuda.graph by hand: optimizer state before recording, a warm-up on a side stream, every step from no
    # gradients to none
    t0 = time.perf_counter()
    opt = AdamW(params, lr=torch.tensor(1e-5, device=device), capturable=True,
                compiled=row == "ours-inductor-graph")
    opt.init_state(capturable=True)
    g = torch.Generator().manual_seed(1)
    ids = random_ids(args, g).to(device)
    mask, labels = torch.ones_like(ids), torch.zeros(args.batch_size, dtype=torch.long, device=device)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            loss_of(ids, mask, labels).backward()
        opt.compile_now()  # (with compiled=True: the update compiled on these gradients, every tensor kept)
    torch.cuda.current_stream().wait_stream(side)
    opt.zero_grad(set_to_none=True)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        loss_of(ids, mask, labels).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()

    def replay(new_ids, new_mask, new_labels):
        ids.copy_(new_ids, non_blocking=True)
        mask.copy_(new_mask, non_blocking=True)
        labels.copy_(new_labels, non_blocking=True)
        graph.replay()
    return replay, time.perf_counter() - t0


def time_row(args, row, device, amp):
    g = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(args.warmup + args.steps):
        ids = random_ids(args, g, cls=True)
        batches.append((ids.to(device), torch.ones_like(ids).to(device),
                        torch.randint(0, 5, (args.batch_size,), generator=g).to(device)))
    step, setup = step_function(args, row, device, amp)
    t0 = time.perf_counter()
    for b in batches[:args.warmup]:
        step(*b)
    if device.type == "cuda":
        torch.cuda.synchronize()
    first = time.perf_counter() - t0 + setup
    passes = []
    for _ in range(args.repeats):
        if device.type == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for b in batches[args.warmup:]:
                step(*b)
            end.record()
            end.synchronize()
            passes.append(start.elapsed_time(end) / args.steps)
        else:
            t = time.perf_counter()
            for b in batches[args.warmup:]:
                step(*b)
            passes.append(1000 * (time.perf_counter() - t) / args.steps)
    return {"row": row, "ms_per_step": statistics.median(passes), "passes_ms": passes, "first_steps_s": first}


def main(argv=None):
    ap = Parser(prog="tools/step_timing.py", description=__doc__)
    ap.add_argument("--config", choices=sorted(SHAPES), default="minilm", help="the random model's shape")
    ap.add_argument("--pretrained", default=None, help="a checkpoint instead (its "
                                                       "weights, our loader and HF's)")
    ap.add_argument("--seq_len", type=int, default=128)
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--use_gpu", action="store_true")
    ap.add_argument("--amp", choices=["bf16", "none"], default=None, help="default: bf16 on a "
                                                                          "GPU, none on the CPU")
    ap.add_argument("--rows", default=None, help="comma-separated (default: every row this device runs)")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args(argv)
    if min(args.seq_len, args.batch_size, args.steps, args.repeats) < 1 or args.warmup < 0:
        ap.error("--seq_len, --batch_size, --steps and --repeats must be at least 1, --warmup at least 0")
    device = torch.device("cuda" if args.use_gpu else "cpu")
    if args.use_gpu and not torch.cuda.is_available():
        ap.error("--use_gpu: no GPU is visible to torch")
    amp = (args.amp or ("bf16" if device.type == "cuda" else "none")) == "bf16"
    rows = args.rows.split(",") if args.rows else [r for r in ROWS if device.type == "cuda" or r not in GPU_ROWS]
    bad = [r for r in rows if r not in ROWS or (r in GPU_ROWS and device.type != "cuda")]
    if bad:
        ap.error(f"--rows {','.join(bad)}: not a row this device runs "
                 f"({', '.join(r for r in ROWS if r not in GPU_ROWS)}; on a GPU also {', '.join(GPU_ROWS)})")
    positions = model_config(args).max_position_embeddings
    if args.seq_len > positions:  # (the embedding would refuse it with a traceback, after the set-up)
        ap.error(f"--seq_len {args.seq_len}: the model has {positions} positions; at most --seq_len {positions}")
    dup = next((r for i, r in enumerate(rows) if r in rows[:i]), None)
    if dup:
        ap.error(f"--rows: {dup} is named twice; each row is timed once")
    if args.json:
        check_file(args.json, "--json")  # before the minutes of timing, not after them
    name = (torch.cuda.get_device_name() if device.type == "cuda"
            else f"CPU {torch.backends.cpu.get_cpu_capability()}")
    results = {"device": name, "torch": torch.__version__, "threads": torch.get_num_threads(), "amp": amp,
               "shape": [args.batch_size, args.seq_len], "model": args.pretrained or f"random {args.config}",
               "rows": []}
    for row in rows:
        r = time_row(args, row, device, amp)
        results["rows"].append(r)
        print(f"{row:>12}: {r['ms_per_step']:8.2f} ms/step (passes "
              f"{', '.join(f'{p:.2f}' for p in r['passes_ms'])}); first {args.warmup} steps "
              f"{r['first_steps_s']:.2f}s [{name}, {'bf16' if amp else 'fp32'}, "
              f"batch {args.batch_size} x {args.seq_len}]", flush=True)
    if args.json:
        write_output(args.json, lambda fp: fp.write(json.dumps(results, indent=2)), "tools/step_timing.py",
                     mode="w")
        print(f"results written to {args.json}")
    return results


if __name__ == "__main__":
    main_guard(main)
