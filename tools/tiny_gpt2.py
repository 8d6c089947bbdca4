"""A small GPT-2 to train on the sonnets where no GPT-2 weights can be downloaded: random weights at a
shape of your choosing and a byte-level BPE vocabulary (with GPT-2's <|endoftext|>) learnt from the
sonnets, written as a checkpoint folder in HF's layout, which the GPT-2 scripts take (--pretrained OUT) and HF
transformers loads too (gpt2/sanity_check.py compares the two): config.json, vocab.json, merges.txt and
model.safetensors, all in HF's names (gpt2/models/base_gpt.py ours_to_hf).

    python tools/tiny_gpt2.py pretrained/tiny-gpt2
    cd gpt2 && python sonnet_generation.py --pretrained ../pretrained/tiny-gpt2 --epochs 20 --lr 1e-3

Weights trained this way from random on 143 sonnets say nothing of what GPT-2's own weights would do: they
exercise the code (training, decoding, chrF) end to end."""
import json
import sys
from pathlib import Path

if not __package__:  # run as a file (python tools/NAME.py): the project folder first, not tools/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# first, before torch loads: a Ctrl-C meanwhile is one line (minbert/cli.py)
from minbert.cli import MinbertError, Parser, main_guard  # noqa: E402

import torch  # noqa: E402

from gpt2.config import GPT2Config  # noqa: E402
from gpt2.models.base_gpt import ours_to_hf  # noqa: E402
from gpt2.models.gpt2 import GPT2Model  # noqa: E402
from gpt2.tokenizer import EOS  # noqa: E402
from minbert.course_data import read_sonnets  # noqa: E402
from minbert.files import special_file  # noqa: E402
from minbert.flags.types import positive_int, seed  # noqa: E402
from minbert.project_paths import among_sources, run_folder_of  # noqa: E402

SONNETS = Path(__file__).resolve().parent.parent / "data" / "sonnets.txt"  # wherever the tool is run from


def main(argv=None):
    ap = Parser(prog="tools/tiny_gpt2.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the checkpoint folder to write (new, or empty)")
    ap.add_argument("--sonnets", default=str(SONNETS), help="the text the vocabulary is learnt from")
    ap.add_argument("--vocab_size", type=positive_int, default=2000, help="BPE tokens, <|endoftext|> among them")
    ap.add_argument("--n_embd", type=positive_int, default=128)
    ap.add_argument("--n_layer", type=positive_int, default=4)
    ap.add_argument("--n_head", type=positive_int, default=4)
    ap.add_argument("--n_positions", type=positive_int, default=512, help="enough for a sonnet's 14 lines")
    ap.add_argument("--seed", type=seed, default=0, help="seeds the random weights")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if out.is_symlink() and not out.exists():
        raise MinbertError(f"{out}: a broken link (its target is missing); give a new folder")
    if out.exists() and not out.is_dir():
        raise MinbertError(f"{out}: is {special_file(out) or 'a file'}, where the checkpoint's folder goes; give a "
                           "new folder")
    if out.exists() and any(out.iterdir()):
        raise MinbertError(f"{out}: exists and is not an empty folder; give a new one")
    run = run_folder_of(out)
    if run is not None:  # the rule for every output: a run's folder holds that run's files only
        raise MinbertError(f"{out}: inside {run}, the folder of a run, whose files belong to its "
                           "checkpoint and log; write the checkpoint elsewhere, e.g. pretrained/tiny-gpt2")
    if among_sources(out):  # the rule for every output (docs/runs.md): never among the code, docs or data
        raise MinbertError(f"{out}: among the project's own code, docs or data; write the checkpoint elsewhere, "
                           "e.g. pretrained/tiny-gpt2")
    if args.n_embd % args.n_head:  # checked before anything is written, so that the same command can run again
        raise MinbertError(f"--n_embd {args.n_embd} --n_head {args.n_head}: the width must be a multiple of "
                           "the number of heads (each head takes width / heads dimensions)")
    lines = [line for _, text in read_sonnets(args.sonnets) for line in text.split("\n")]
    from tokenizers import ByteLevelBPETokenizer
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator([line + "\n" for line in lines], vocab_size=args.vocab_size, min_frequency=2,
                            special_tokens=[EOS], show_progress=False)
    eos = bpe.token_to_id(EOS)
    # GPT-2 begins and ends a text with the same token (HF's config names both)
    config = GPT2Config(vocab_size=bpe.get_vocab_size(), hidden_size=args.n_embd,
                        num_hidden_layers=args.n_layer, num_attention_heads=args.n_head,
                        intermediate_size=4 * args.n_embd, max_position_embeddings=args.n_positions,
                        eos_token_id=eos, extra={"bos_token_id": eos})
    torch.manual_seed(args.seed)
    model = GPT2Model(config)  # built before anything is written: a size that fails leaves no half folder
    out.mkdir(parents=True, exist_ok=True)
    bpe.save_model(str(out))
    from safetensors.torch import save_file
    save_file(ours_to_hf(model.state_dict()), str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(config.to_dict(), indent=2) + "\n")
    if config.vocab_size != args.vocab_size:  # BPE learns what the text holds: the bytes at least, its merges at most
        why = "the 256 bytes and <|endoftext|> at least" if args.vocab_size < 257 else "every merge its text allows"
        print(f"note: --vocab_size {args.vocab_size}: the vocabulary learnt from {args.sonnets} has "
              f"{config.vocab_size} tokens ({why})")
    n = sum(p.numel() for p in model.parameters())
    print(f"{out}: a GPT-2 of {n / 1e6:.2f} M random weights ({args.n_layer} layers, width {args.n_embd}, "
          f"{args.n_positions} positions) and a {config.vocab_size}-token vocabulary "
          f"learnt from {args.sonnets}")
    return out


if __name__ == "__main__":
    main_guard(main)
