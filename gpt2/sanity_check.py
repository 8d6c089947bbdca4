"""Check GPT2Model against HF transformers' GPT-2 on the same weights (handout section 5.2):

    cd gpt2 && python sanity_check.py --pretrained FOLDER     # a GPT-2 checkpoint folder in HF's layout

With transformers installed the reference is HF's model on that folder; --reference FILE instead compares with
saved outputs (a torch-saved dict holding last_hidden_state for the fixed input below), so no transformers is
needed. Loading a file never runs code from it."""
import sys
from pathlib import Path

# Run as a script, Python puts this folder first on the path, where config.py and utils.py would shadow the
# shared ones: the project folder takes its place (gpt2.* and the shared library are imported from there).
if Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

# first, before torch loads: a Ctrl-C meanwhile is one line (minbert/cli.py)
from minbert.cli import MinbertError, Parser, main_guard  # noqa: E402

import torch  # noqa: E402

from gpt2.models.gpt2 import GPT2Model  # noqa: E402
from minbert.hub import resolve_pretrained  # noqa: E402
from minbert.safe_load import refuse_code, safe_load  # noqa: E402

INPUT_IDS = [[5, 17, 42, 8, 3, 11, 29, 2], [7, 1, 13, 21, 9, 0, 0, 0]]
MASK = [[1] * 8, [1] * 5 + [0] * 3]


def reference_outputs(args, ids, mask):
    """(last_hidden_state [B, T, d], what it came from)."""
    if args.reference:
        ref, culprit = safe_load(args.reference, "the reference")
        if culprit is not None:
            raise refuse_code(args.reference, culprit)
        if not isinstance(ref, dict) or "last_hidden_state" not in ref:
            raise MinbertError(f"--reference {args.reference}: not a dict holding last_hidden_state")
        return ref["last_hidden_state"].float(), args.reference
    try:
        from transformers import GPT2Model as HFGPT2Model
        from transformers.utils import logging as hf_logging
    except ImportError:
        raise MinbertError("transformers is not installed: pip install "
                           "transformers, or give --reference FILE") from None
    hf_logging.disable_progress_bar()  # its "Loading weights" bar is HF's business, not the check's
    with torch.no_grad():
        # the folder HF reads (--pretrained may name the weights file in it, which our loader takes too)
        folder = str(resolve_pretrained(args.pretrained).folder)
        return HFGPT2Model.from_pretrained(folder).eval()(ids,
                                                                   attention_mask=mask).last_hidden_state, \
            "HF transformers' GPT-2 on the same weights"


def build_parser():
    ap = Parser(prog="sanity_check.py", description=__doc__)
    ap.add_argument("--pretrained", required=True, help="a GPT-2 checkpoint folder "
                                                        "(config.json and its weights)")
    ap.add_argument("--reference", help="saved outputs to compare with instead of HF transformers")
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    model = GPT2Model.from_pretrained(args.pretrained).eval()
    ids, mask = torch.tensor(INPUT_IDS), torch.tensor(MASK)
    if ids.max() >= model.config.vocab_size:
        raise MinbertError(f"--pretrained {args.pretrained}: a vocabulary of {model.config.vocab_size} is "
                           "smaller than the check's token ids")
    with torch.no_grad():
        ours = model(ids, mask)["last_hidden_state"]
    theirs, against = reference_outputs(args, ids, mask)
    real = mask.bool()
    diff = (ours[real] - theirs[real]).abs().max().item()
    if diff > 1e-4:
        raise MinbertError(f"GPT2Model differs from {against}: largest "
                           f"difference {diff:.2e} (tolerance 1e-4)")
    print(f"Your GPT-2 implementation is correct! ({args.pretrained}, "
          f"checked against {against}; largest difference {diff:.1e})")


if __name__ == "__main__":
    main_guard(main)
