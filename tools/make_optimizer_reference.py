"""Writes optimizer_test.npy: the handout's optimizer test, computed independently in float64 NumPy.

Only the initial weights come from torch (nn.Linear(3, 2, bias=False) after torch.manual_seed(0)), so
that the reference starts where optimizer_test.py starts; gradients and Algorithm 1 (efficient bias
correction, then decoupled weight decay theta <- theta - lr * wd * theta) are NumPy, float64.
Run: python tools/make_optimizer_reference.py
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if not __package__:  # run as a file (python tools/NAME.py): the project folder first, not tools/
    sys.path.insert(0, str(ROOT))

# first, before torch loads: a Ctrl-C meanwhile is one line (minbert/cli.py)
from minbert.cli import MinbertError, Parser, main_guard  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

SEED, STEPS, LR, WD, BETAS, EPS = 0, 1000, 1e-3, 1e-4, (0.9, 0.999), 1e-6


def reference_weights():
    rng = np.random.default_rng(SEED)
    torch.manual_seed(SEED)
    W = torch.nn.Linear(3, 2, bias=False).weight.detach().numpy().astype(np.float64)
    m, v = np.zeros_like(W), np.zeros_like(W)
    for t in range(1, STEPS + 1):
        x = rng.uniform(size=[3]).astype(np.float32).astype(np.float64)  # same draws as the test
        y = np.array([x[0] + x[1], -x[2]])
        g = -2.0 * np.outer(y - W @ x, x)  # d/dW of sum((y - W x)^2)
        m = BETAS[0] * m + (1 - BETAS[0]) * g
        v = BETAS[1] * v + (1 - BETAS[1]) * g * g
        alpha = LR * np.sqrt(1 - BETAS[1] ** t) / (1 - BETAS[0] ** t)
        W = W - alpha * m / (np.sqrt(v) + EPS)
        W = W - LR * WD * W
    return W


def main(argv=None, out=ROOT / "optimizer_test.npy"):
    # no flags, but --help must print what the tool does and write nothing
    Parser(prog="tools/make_optimizer_reference.py", description=__doc__).parse_args(argv)
    weights = reference_weights()
    if out.exists():  # the course's file, or one of the user's: replaced only where it holds what this computes
        try:
            same = np.allclose(np.load(out, allow_pickle=False), weights, rtol=0, atol=1e-12)
        except (OSError, ValueError):
            same = False
        if not same:
            raise MinbertError(f"{out}: holds other weights than this computes (a file of yours, or damaged); "
                               "nothing was written: move it away to write the reference there")
    np.save(out, weights)
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main_guard(main)
