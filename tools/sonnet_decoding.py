"""chrF of the held-out dev sonnets completed from one trained model (a sonnet_generation.py run's best
checkpoint) by each decoding: greedy, top-p sampling, and beam search with each number of beams asked for.
The completions follow the command's 14-line rule (gpt2/sonnets.py LineRule); chrF is the command's.

    cd gpt2 && python sonnet_generation.py --pretrained FOLDER --run_dir runs/s
    python tools/sonnet_decoding.py gpt2/runs/s/sonnet.pt --beams 2 4 8 --json OUT

Each figure says what the checkpoint's weights can do, and no more: a model trained from random weights on
the sonnets (tools/tiny_gpt2.py) says nothing of GPT-2's own."""
import json
import sys
from pathlib import Path

if not __package__:  # run as a file (python tools/NAME.py): the project folder first, not tools/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# first, before torch loads: a Ctrl-C meanwhile is one line (minbert/cli.py)
from minbert.cli import MinbertError, Parser, main_guard  # noqa: E402

import torch  # noqa: E402

from gpt2.sonnet_pipeline import dev_chrf  # noqa: E402
from gpt2.sonnets import SonnetGPT, check_prompts, check_true_dev, complete, read_sonnets  # noqa: E402
from gpt2.tokenizer import GPT2Tokenizer  # noqa: E402
from minbert.flags.types import (beams, early_stopping, length_penalty, nonneg_int, positive_float, positive_int,  # noqa: E402
                                 seed, share)
from minbert.runs.checkpoint import load_checkpoint, load_trainable_state, read_spec  # noqa: E402
from minbert.runs.outputs import check_file  # noqa: E402
from minbert.specs import Recipe, SonnetSettings  # noqa: E402
from minbert.runs.publishing import write_output  # noqa: E402


def load_sonnet_model(path):
    """The SonnetGPT of a sonnet_generation.py checkpoint, and its tokenizer."""
    state = load_checkpoint(path)
    if state.get("pipeline") != "gpt2-sonnet":
        raise MinbertError(f"{path}: not a sonnet_generation.py checkpoint (its pipeline is "
                           f"{state.get('pipeline')!r})")
    spec = read_spec(state, path)
    model = SonnetGPT(spec.pretrained)
    load_trainable_state(model, state["model"], path)
    return model.eval(), GPT2Tokenizer.from_pretrained(spec.pretrained)


def chrf_by_decoding(model, tok, prompts, true, decodings, max_line_tokens):
    """{decoding: dev chrF} of the `prompts` completed by each of `decodings` ({name: complete()'s keywords}),
    each printed as it comes."""
    results = {}
    for name, kw in decodings.items():
        dev = [(n, complete(model, tok, text, max_line_tokens=max_line_tokens, **kw)) for n, text in prompts]
        results[name] = dev_chrf(dev, true)
        print(f"  {name}: dev chrF {results[name]:.2f}")
    return results


def main(argv=None):
    ap = Parser(prog="tools/sonnet_decoding.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("checkpoint", help="a sonnet_generation.py run's sonnet.pt")
    ap.add_argument("--held_out_dev_path", default="data/sonnets_held_out_dev.txt")
    ap.add_argument("--true_dev_path", default="data/TRUE_sonnets_held_out_dev.txt")
    ap.add_argument("--max_line_tokens", type=positive_int, default=SonnetSettings.max_line_tokens)
    ap.add_argument("--temperature", type=positive_float, default=SonnetSettings.temperature,
                    help="top-p sampling's temperature")
    ap.add_argument("--top_p", type=share, default=SonnetSettings.top_p)
    ap.add_argument("--seed", type=seed, default=Recipe.seed, help="seeds the sampling")
    ap.add_argument("--beams", type=beams, nargs="+", default=[SonnetSettings.num_beams],
                    help="beam search with each of these")
    ap.add_argument("--length_penalty", type=length_penalty, default=SonnetSettings.length_penalty)
    ap.add_argument("--no_repeat_ngram_size", type=nonneg_int, default=SonnetSettings.no_repeat_ngram_size)
    ap.add_argument("--early_stopping", type=early_stopping, default=SonnetSettings.early_stopping,
                    metavar="{false,true,never}",
                    help="beam search's stopping rule, HF's (gpt2/generation.py)")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    if args.json:
        check_file(args.json, "--json")
    model, tok = load_sonnet_model(args.checkpoint)
    prompts = read_sonnets(args.held_out_dev_path)
    check_prompts(prompts, args.held_out_dev_path, tok, model.gpt.config.max_position_embeddings,
                  args.max_line_tokens, args.no_repeat_ngram_size if args.beams else 0)
    check_true_dev(args.held_out_dev_path, args.true_dev_path)
    true = dict(read_sonnets(args.true_dev_path))
    blocking = f", no repeated {args.no_repeat_ngram_size}-grams" if args.no_repeat_ngram_size else ""
    blocking += f", early_stopping {str(args.early_stopping).lower()}"
    decodings = {"greedy": dict(temperature=0.0),
                 f"top-p (temperature {args.temperature:g}, p {args.top_p:g}, seed {args.seed})":
                     dict(temperature=args.temperature, top_p=args.top_p,
                          generator=torch.Generator().manual_seed(args.seed)),
                 **{f"beam search K={k} (length penalty {args.length_penalty:g}{blocking})":
                    dict(num_beams=k, length_penalty=args.length_penalty,
                         no_repeat_ngram_size=args.no_repeat_ngram_size, early_stopping=args.early_stopping)
                    for k in args.beams}}
    print(f"{args.checkpoint}: {len(prompts)} dev sonnets completed from their first lines")
    r = {"checkpoint": str(args.checkpoint), "sonnets": len(prompts),
         "chrf": chrf_by_decoding(model, tok, prompts, true, decodings, args.max_line_tokens)}
    if args.json:
        write_output(args.json, lambda fp: fp.write(json.dumps(r, indent=2) + "\n"),
                     "tools/sonnet_decoding.py", mode="w")
        print(f"the figures are in {args.json}")
    return r


if __name__ == "__main__":
    main_guard(main)
