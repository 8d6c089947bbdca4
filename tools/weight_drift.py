"""How far fine-tuning moved each kind of BERT tensor: the relative change ||w - w0|| / ||w0|| of every
encoder tensor of a checkpoint against the pretrained weights, summarised (median over tensors) per kind.

    python tools/weight_drift.py runs/a/multitask.pt runs/b/multitask.pt [--pretrained all-minilm-l6-v2]

Optimizers differ less in how far they move the weights overall than in where: AdamW's step is about the same
size for every coordinate, so tensors of large values (LayerNorm gains, near 1) change little relative to
their size; LAMB's trust ratio makes every tensor's step proportional to its norm (RESULTS.md, "Part 2: the
extensions of handout 5.3"). Only tensors that exist in both are compared (adapters and heads are new).
"""
import statistics
import sys
from pathlib import Path

if not __package__:  # run as a file (python tools/NAME.py): the project folder first, not tools/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# first, before torch loads: a Ctrl-C meanwhile is one line (minbert/cli.py)
from minbert.cli import MinbertError, Parser, main_guard  # noqa: E402

from bert import BertModel  # noqa: E402
from minbert.files import first_repeated  # noqa: E402
from minbert.safe_load import refuse_code, safe_load  # noqa: E402

KINDS = ("weight matrices", "linear biases", "embedding tables", "LayerNorm gains", "LayerNorm biases")


def tensor_kind(name, value):
    if "layer_norm" in name:
        return "LayerNorm gains" if name.endswith("weight") else "LayerNorm biases"
    if "embedding" in name:
        return "embedding tables"
    return "weight matrices" if value.dim() == 2 else "linear biases"


def drift(model_state, pretrained_state, prefix="bert."):
    """{kind: [relative change of each tensor]} over the encoder tensors the two states share (the pooler
    aside: mean pooling leaves it untrained)."""
    out = {}
    for name, value in model_state.items():
        if not name.startswith(prefix):
            continue
        base = pretrained_state.get(name[len(prefix):])
        if base is None or base.shape != value.shape or name.startswith(prefix + "pooler"):
            continue
        base = base.float()
        change = (value.float() - base).norm() / base.norm().clamp_min(1e-12)
        out.setdefault(tensor_kind(name[len(prefix):], base), []).append(change.item())
    return out


def same_weights(a, b):
    """Whether --pretrained values `a` and `b` name the same weights: one name, or one folder written two ways."""
    return a == b or Path(a).is_dir() and Path(b).is_dir() and Path(a).resolve() == Path(b).resolve()


def main(argv=None):
    ap = Parser(prog="tools/weight_drift.py", description=__doc__)
    ap.add_argument("checkpoints", nargs="+", help="checkpoints that multitask_classifier.py "
                                                   "or classifier.py wrote")
    ap.add_argument("--pretrained", default="all-minilm-l6-v2", help="the weights they started from")
    args = ap.parse_args(argv)
    folder = next((p for p in args.checkpoints if Path(p).is_dir()), None)
    if folder is not None:  # before any line of the table
        raise MinbertError(f"{folder}: a folder; give the checkpoint in it (a .pt file its run wrote)")
    twice = first_repeated(args.checkpoints)
    if twice is not None:
        raise MinbertError(f"{twice}: given twice; each checkpoint is a row once")
    start = BertModel.from_pretrained(args.pretrained).state_dict()
    rows = {}  # every checkpoint read and checked before the table's first line: a bad one is the only line
    for path in args.checkpoints:
        state, culprit = safe_load(path)
        if culprit is not None:
            raise refuse_code(path, culprit)
        if not isinstance(state, dict) or not isinstance(state.get("model"), dict):
            raise MinbertError(f"{path}: not a minbert checkpoint (no model weights in it)")
        spec = state.get("spec") or {}
        if str(state.get("pipeline", "")).startswith("gpt2"):  # before its start is named: no BERT start fits it
            raise MinbertError(f"{path}: a Build GPT-2 run's checkpoint ({state['pipeline']}); this tool measures "
                               "how far a BERT encoder moved from its pretrained weights")
        started = spec.get("pretrained")
        if started is not None and not same_weights(started, args.pretrained):  # a drift from the wrong start
            raise MinbertError(f"{path}: its run started from {started}, not from --pretrained "
                               f"{args.pretrained}: give --pretrained {started}")
        by_kind = drift(state["model"], start)
        if not by_kind and spec.get("fine_tune_mode") == "last-linear-layer":
            raise MinbertError(f"{path}: holds no encoder tensor: its run trained the head alone (a checkpoint "
                               "keeps what trains, and --fine-tune-mode last-linear-layer freezes BERT), so "
                               f"the encoder is {args.pretrained}'s unchanged")
        if not by_kind:
            raise MinbertError(f"{path}: none of its tensors is one of "
                               f"{args.pretrained}'s (another checkpoint?)")
        rows[path] = {k: statistics.median(v) for k, v in by_kind.items()}
        del state
    print(f"median relative change per tensor against {args.pretrained}")
    print("checkpoint | " + " | ".join(KINDS))
    for path, row in rows.items():
        print(f"{path} | " + " | ".join(f"{row[k]:.2e}" if k in row else "-" for k in KINDS))
    return rows


if __name__ == "__main__":
    main_guard(main)
