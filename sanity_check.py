"""Checks BertModel on the handout's two example inputs.

For bert-base-uncased (the default) against the course's sanity_check.data, bert-base-uncased's own outputs,
where `python datasets.py --fetch` put it (data/, checked against its git blob id); for any other checkpoint,
or without that file, against an independent NumPy forward pass of the same pretrained weights (float64).
--reference FILE compares against a saved reference in the course's format (a torch-saved dict with
'last_hidden_state' and 'pooler_output'). The last line says what the model was checked against.
"""

from math import erf, sqrt
from pathlib import Path

# first, before torch loads: a Ctrl-C meanwhile is one line (minbert/cli.py)
from minbert.cli import MinbertError, Parser, main_guard

import numpy as np
import torch

from base_bert import hf_to_ours, read_state_dict
from bert import BertModel
from minbert.course_files import course_reference
from minbert.safe_load import refuse_code, safe_load
from minbert.hub import HUB_NAMES, resolve_pretrained

INPUT_IDS = [[101, 7592, 2088, 102, 0, 0, 0, 0], [101, 7592, 15756, 2897, 2005, 17953, 2361, 102]]
ATOL, RTOL = 1e-5, 1e-3
DATA = Path(__file__).resolve().parent / "data"  # where --fetch puts the course's sanity_check.data
COURSE_MODEL = "bert-base-uncased"  # the model whose outputs sanity_check.data holds


def numpy_bert(weights, cfg, ids, mask):
    """BERT written again in float64 NumPy from the checkpoint's own tensors, no torch modules."""
    W = weights
    H, nh, eps = cfg.hidden_size, cfg.num_attention_heads, cfg.layer_norm_eps
    dh = H // nh
    gelu = np.vectorize(lambda x: 0.5 * x * (1.0 + erf(x / sqrt(2.0))))

    def ln(x, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + eps) * W[name + ".weight"] + W[name + ".bias"]

    def lin(x, name):
        return x @ W[name + ".weight"].T + W[name + ".bias"]

    B, T = ids.shape
    h = W["word_embedding.weight"][ids] + W["pos_embedding.weight"][:T] + W["tk_type_embedding.weight"][0]
    h = ln(h, "embed_layer_norm")
    neg = np.where(mask[:, None, None, :] > 0, 0.0, -1e30)
    for i in range(cfg.num_hidden_layers):
        p = f"bert_layers.{i}."
        q, k, v = (lin(h, p + "self_attention." + n).reshape(B, T, nh, dh).transpose(0, 2, 1, 3)
                   for n in ("query", "key", "value"))
        s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(dh) + neg
        s = np.exp(s - s.max(-1, keepdims=True))
        a = (s / s.sum(-1, keepdims=True)) @ v
        a = a.transpose(0, 2, 1, 3).reshape(B, T, H)
        h = ln(h + lin(a, p + "attention_dense"), p + "attention_layer_norm")
        h = ln(h + lin(gelu(lin(h, p + "interm_dense")), p + "out_dense"), p + "out_layer_norm")
    pooled = np.tanh(lin(h[:, 0], "pooler_dense"))
    return {"last_hidden_state": h, "pooler_output": pooled}


def compare(ours, ref, mask):
    """Return a list of 'name: max |diff| ...' lines for tensors that differ; padding is masked out."""
    problems = []
    for name in ("last_hidden_state", "pooler_output"):
        a = np.asarray(ours[name], dtype=np.float64)
        b = np.asarray(ref[name], dtype=np.float64)
        if a.shape != b.shape:
            problems.append(f"{name}: shape {list(a.shape)} but the reference has {list(b.shape)}")
            continue
        if name == "last_hidden_state":
            keep = mask.astype(bool)
            a, b = a[keep], b[keep]
        close = np.isclose(a, b, atol=ATOL, rtol=RTOL)
        if not close.all():
            d = np.abs(a - b)
            problems.append(f"{name}: {int((~close).sum())} of {close.size} values differ, "
                            f"max |diff| {d.max():.3g} (atol {ATOL}, rtol {RTOL})")
    return problems


def build_parser():
    ap = Parser(prog="sanity_check.py", description=__doc__)
    ap.add_argument("--pretrained", default="bert-base-uncased", help="the checkpoint whose "
                                                                      "forward pass is checked")
    ap.add_argument("--reference", help="torch-saved dict with last_hidden_state and pooler_output")
    return ap


def read_reference(path, name=None):
    """The saved outputs of a reference file (tensors only: no code runs), checked before any model is built.
    `name` is how messages name it: --reference's file by default, the course's sanity_check.data otherwise."""
    name = name or f"--reference {path}"
    ref, culprit = safe_load(path, "the reference")
    if culprit is not None:
        raise refuse_code(path, culprit)
    if not isinstance(ref, dict):
        raise MinbertError(f"{name}: not a reference (it holds a "
                           f"{type(ref).__name__}, not a dict of outputs)")
    missing = [k for k in ("last_hidden_state", "pooler_output") if k not in ref]
    if missing:
        raise MinbertError(f"{name}: lacks {' and '.join(missing)} (it holds "
                           f"{', '.join(map(str, list(ref)[:5])) or 'nothing'}); "
                           "a reference is a dict of the two outputs")
    return {k: (v.detach().cpu().numpy() if torch.is_tensor(v) else v) for k, v in ref.items()}


def default_reference(pretrained, data_dir=None):
    """(path or None, words) for a run without --reference: the course's sanity_check.data for the model whose
    outputs it holds, else None (the NumPy pass), with the words saying why."""
    if str(pretrained).lower() not in (COURSE_MODEL, HUB_NAMES[COURSE_MODEL]):
        return None, f"the course's sanity_check.data holds {COURSE_MODEL}'s outputs, not {pretrained}'s"
    return course_reference("sanity_check.data", data_dir or DATA)


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.reference:
        ref, against = read_reference(args.reference), args.reference
    else:
        path, against = default_reference(args.pretrained)
        ref = None if path is None else read_reference(
            path, f"{path} (the course's sanity_check.data; python datasets.py --fetch puts the right one there)")
    model = BertModel.from_pretrained(args.pretrained).eval()
    largest = max(max(row) for row in INPUT_IDS)
    if largest >= model.config.vocab_size:  # the handout's inputs are bert-base-uncased's WordPiece ids
        raise MinbertError(f"--pretrained {args.pretrained}: its vocabulary has {model.config.vocab_size} tokens, "
                           f"but the handout's check sentences hold token id {largest}: it checks a model with "
                           "bert-base-uncased's vocabulary (30522 tokens), as all-minilm-l6-v2 has")
    ids = torch.tensor(INPUT_IDS)
    mask = (ids != model.config.pad_token_id).long()
    with torch.inference_mode():
        out = {k: v.numpy() for k, v in model(ids, mask).items()}
    if ref is None:
        ckpt = resolve_pretrained(args.pretrained).require("weights")
        weights = {}
        for k, v in read_state_dict(ckpt.weights).items():
            if hf_to_ours(k) is not None:
                weights[hf_to_ours(k)] = v.double().numpy()
        ref = numpy_bert(weights, model.config, np.array(INPUT_IDS), mask.numpy())
        against = f"an independent NumPy forward pass of the same weights; {against}"
    problems = compare(out, ref, mask.numpy())
    if problems:
        raise MinbertError(f"BERT differs from {against}: " + "; ".join(problems))
    print(f"Your BERT implementation is correct! ({args.pretrained}, checked against {against})")


if __name__ == "__main__":
    main_guard(main)
