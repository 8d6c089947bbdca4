"""The handout's optimizer test: 1000 AdamW steps on Linear(3, 2) against optimizer_test.npy.

optimizer_test.npy was written by tools/make_optimizer_reference.py, an independent float64 NumPy
implementation of Algorithm 1 that starts from the same initial weights and sees the same inputs.
"""
import numpy as np
import torch

from optimizer import AdamW
from utils import Parser, main_guard

SEED = 0


def test_optimizer(opt_class, **opt_kwargs):
    rng = np.random.default_rng(SEED)
    torch.manual_seed(SEED)
    model = torch.nn.Linear(3, 2, bias=False)
    opt = opt_class(model.parameters(), lr=1e-3, weight_decay=1e-4, correct_bias=True, **opt_kwargs)
    for _ in range(1000):
        opt.zero_grad()
        x = torch.FloatTensor(rng.uniform(size=[model.in_features]))
        y_hat = model(x)
        y = torch.Tensor([x[0] + x[1], -x[2]])
        loss = ((y - y_hat) ** 2).sum()
        loss.backward()
        opt.step()
    return model.weight.detach()


def main(argv=None):
    # no flags, but --help must print what the script does and run nothing
    Parser(prog="optimizer_test.py", description=__doc__).parse_args(argv)
    ref = np.load("optimizer_test.npy", allow_pickle=False)
    # every path of our AdamW: the reference loop, the multi-tensor kernels, the fused pass (the default)
    for path in ({"foreach": False}, {"fused": False}, {}):
        actual = test_optimizer(AdamW, **path).numpy()
        if not np.allclose(ref, actual, atol=1e-6, rtol=1e-4):
            raise SystemExit(f"Optimizer test failed ({path or 'fused'}): max |diff| "
                             f"{np.abs(ref - actual).max():.3g}\nreference:\n{ref}\nyours:\n{actual}")
    print("Optimizer test passed!")


if __name__ == "__main__":
    main_guard(main)
