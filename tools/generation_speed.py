"""GPT-2 generation speed: tokens per second of greedy decoding with our key-value cache, without
it (the starter's loop: the whole sequence through the model for every new token), and HF
transformers' generate, on one model with the same random weights (no GPT-2 weights can be
downloaded here; speed does not depend on them); with --beams K..., beam search with K beams too, ours
(the cache reordered by beam) and HF's generate(num_beams=K, early_stopping=True).

    python tools/generation_speed.py --shape gpt2 --prompt 32 --new 64 --threads 2 --json OUT
    python tools/generation_speed.py --shape gpt2 --prompt 32 --new 64 --threads 2 --beams 1 2 4 8 --json OUT

Tokens per second count the tokens of the sequence returned (with no end token every beam runs to --new, so
K beams put K times as many tokens through the model). Ours and HF's must produce the same tokens (greedy:
all three; each K: ours and HF's, and one beam greedy's; checked, and said); each figure is the median of
--repeats runs."""
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

from gpt2.config import GPT2Config  # noqa: E402
from gpt2.generation import beam_search, generate  # noqa: E402
from gpt2.models.gpt2 import GPT2Model  # noqa: E402
from minbert.flags.types import beams, positive_int, threads  # noqa: E402
from minbert.runs.outputs import check_file  # noqa: E402
from minbert.runs.publishing import write_output  # noqa: E402

SHAPES = {"gpt2": dict(n_embd=768, n_layer=12, n_head=12),
          "gpt2-medium": dict(n_embd=1024, n_layer=24, n_head=16),
          # (its end-of-text token within its 100 ids: GPT-2's 50256 is beyond them, which HF warns of)
          "tiny": dict(n_embd=32, n_layer=2, n_head=4, vocab_size=100, n_positions=128, bos_token_id=99,
                       eos_token_id=99)}


def timed(fn, repeats):
    """(median seconds, the last result) of `repeats` calls."""
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def measure(shape, prompt_len, new, repeats, seed=0, beams=()):
    from transformers import GPT2Config as HFConfig, GPT2LMHeadModel
    hf_config = HFConfig(**SHAPES[shape])
    torch.manual_seed(seed)
    theirs = GPT2LMHeadModel(hf_config).eval()
    ours = GPT2Model(GPT2Config.from_dict(hf_config.to_dict()))
    ours = ours.load_pretrained_weights(theirs.state_dict()).eval()
    prompt = torch.randint(1, hf_config.vocab_size, (1, prompt_len))
    def hf(**kw):
        return lambda: theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=new,
                                       min_new_tokens=new, do_sample=False, pad_token_id=0, **kw)
    runs = {
        "ours, key-value cache": lambda: generate(ours, prompt, new),
        "ours, no cache (the starter's loop)": lambda: generate(ours, prompt, new, use_cache=False),
        "HF transformers generate": hf(),
    }
    agree = [list(runs)]  # groups of runs that must give the same tokens
    for k in beams:
        mine = f"ours, beam search K={k} (key-value cache)"
        theirs_k = f"HF transformers generate num_beams={k}"
        runs[mine] = lambda k=k: beam_search(ours, prompt, new, k, early_stopping=True)
        # (one beam is greedy decoding in HF's generate, which warns that a stopping rule does nothing there)
        runs[theirs_k] = hf(num_beams=k, **({"early_stopping": True} if k > 1 else {}))
        agree.append([mine, theirs_k] + (["ours, key-value cache"] if k == 1 else []))
    results, tokens = {}, {}
    with torch.inference_mode():
        for name, fn in runs.items():
            fn()  # warm-up
            seconds, out = timed(fn, repeats)
            results[name] = {"seconds": seconds, "tokens_per_s": new / seconds}
            tokens[name] = out.tolist()
    same = all(len({json.dumps(tokens[n]) for n in group}) == 1 for group in agree)
    return {"shape": shape, "prompt": prompt_len, "new_tokens": new, "repeats": repeats, "same_tokens": same,
            "beams": list(beams),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
            "runs": results}


def main(argv=None):
    ap = Parser(prog="tools/generation_speed.py", description=__doc__)
    ap.add_argument("--shape", choices=sorted(SHAPES), default="gpt2")
    ap.add_argument("--prompt", type=positive_int, default=32, help="prompt tokens")
    ap.add_argument("--new", type=positive_int, default=64, help="tokens generated")
    ap.add_argument("--repeats", type=positive_int, default=3)
    ap.add_argument("--threads", type=threads, default=None)
    ap.add_argument("--beams", type=beams, nargs="+", default=[], help="also beam search with these numbers of "
                                                                     "beams, ours and HF's")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    if args.json:
        check_file(args.json, "--json")
    if args.threads:
        torch.set_num_threads(args.threads)
    positions = SHAPES[args.shape].get("n_positions", 1024)  # HF's GPT-2 default where the shape names none
    if args.prompt + args.new > positions:
        ap.error(f"--prompt {args.prompt} --new {args.new}: {args.prompt + args.new} tokens, beyond the "
                 f"{args.shape} shape's {positions} positions")
    r = measure(args.shape, args.prompt, args.new, args.repeats, beams=args.beams)
    print(f"{r['shape']}, prompt {r['prompt']}, {r['new_tokens']} new tokens, CPU {r['cpu_capability']}, "
          f"{r['threads']} threads; ours and HF's give the same tokens: {r['same_tokens']}")
    for name, x in r["runs"].items():
        print(f"  {name}: {x['tokens_per_s']:.1f} tokens/s ({x['seconds']:.2f} s)")
    if args.json:
        write_output(args.json, lambda fp: fp.write(json.dumps(r, indent=2) + "\n"),
                     "tools/generation_speed.py", mode="w")
    return r


if __name__ == "__main__":
    main_guard(main)
