"""An ablation of LAMB's gain (RESULTS.md, "Part 2: the extensions of handout 5.3"): multitask_classifier.py
with AdamW, where BERT's LayerNorm gains train at FACTOR times the rate of everything else.

    python tools/layernorm_rate.py FACTOR [multitask_classifier.py flags ...]

LAMB at 5e-4 moves the weight matrices about as far as AdamW at 1e-4 does, but the LayerNorm gains, whose
values sit near 1, about ten times further relative to their size (tools/weight_drift.py). If that is what
helps, AdamW with the gains alone at about ten times its rate should help as much.
"""
import math
import runpy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if not __package__:  # run as a file (python tools/NAME.py): the project folder first, not tools/
    sys.path.insert(0, str(ROOT))

# first, before torch loads: a Ctrl-C meanwhile is one line (minbert/cli.py)
from minbert.cli import MinbertError, main_guard  # noqa: E402
from minbert.runs import identity  # noqa: E402
from minbert.training import schedule  # noqa: E402

USAGE = "usage: tools/layernorm_rate.py FACTOR [multitask_classifier.py flags ...]"


def with_layernorm_factor(param_groups, factor):
    """schedule.param_groups, with every LayerNorm gain of BERT moved into a group of its own
    at `factor` times its rate."""
    def groups(model, lr, llrd=1.0, head_lr=None, weight_decay=0.0):
        gains = {id(p) for n, p in model.named_parameters() if "layer_norm" in n and n.endswith(".weight")}
        out = []
        for g in param_groups(model, lr, llrd, head_lr, weight_decay):
            rest = [p for p in g["params"] if id(p) not in gains]
            mine = [p for p in g["params"] if id(p) in gains]
            out += [{**g, "params": ps, "lr": g["lr"] * f} for ps, f in ((rest, 1.0), (mine, factor)) if ps]
        return out
    return groups


def factor_of(text):
    """FACTOR as a number > 0 (0 would freeze the gains: --freeze_layers' job, not this one's)."""
    try:
        factor = float(text)
    except ValueError:
        raise MinbertError(f"FACTOR {text!r}: not a number; a learning-rate factor must be a number > 0 "
                           f"({USAGE})") from None
    if not (math.isfinite(factor) and factor > 0):
        raise MinbertError(f"FACTOR {text}: a learning-rate factor must be a number > 0")
    return factor


def main(argv=None):
    """Run multitask_classifier.py as `python multitask_classifier.py FLAGS` does, the gains at FACTOR."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] in (["-h"], ["--help"]):
        print(f"{USAGE}\n\n{__doc__.strip()}")
        return
    if not argv:
        raise MinbertError(f"tools/layernorm_rate.py: give FACTOR first ({USAGE})")
    factor = factor_of(argv[0])
    schedule.param_groups = with_layernorm_factor(schedule.param_groups, factor)
    identity.TOOL_SETTINGS["layernorm_rate"] = factor  # the run records it: it is no plain run
    print(f"BERT's LayerNorm gains train at {factor:g} times the rate of the other parameters", flush=True)
    sys.argv = [str(ROOT / "multitask_classifier.py"), *argv[1:]]
    # the script itself, as `python multitask_classifier.py` runs it (its own guard says its errors)
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main_guard(main)
