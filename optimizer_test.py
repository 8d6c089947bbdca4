"""The handout's optimizer test: 1000 AdamW steps on Linear(3, 2) against a reference of the weights.

The reference is the course's optimizer_test.npy where `python datasets.py --fetch` put it (data/, checked
against its git blob id), else the project's own optimizer_test.npy beside this file, written by
tools/make_optimizer_reference.py: an independent float64 NumPy implementation of Algorithm 1 that starts from
the same initial weights and sees the same inputs. The first line printed says which one was used.
"""
from pathlib import Path

# first, before torch loads: a Ctrl-C meanwhile is one line (minbert/cli.py)
from minbert.cli import MinbertError, Parser, main_guard

import numpy as np
import torch

from minbert.course_files import course_reference
from optimizer import AdamW

SEED = 0
HERE = Path(__file__).resolve().parent
DATA = HERE / "data"  # where --fetch puts the course's reference


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


def reference(data_dir=None):
    """(path, words): the course's optimizer_test.npy when --fetch put it in data/, else the project's own."""
    path, words = course_reference("optimizer_test.npy", data_dir or DATA)
    if path is None:
        path, words = HERE / "optimizer_test.npy", f"the project's own optimizer_test.npy ({words})"
    return path, words


def read_reference(path):
    """The reference weights, a [2, 3] array (np.load without pickles: no code of the file's runs)."""
    fix = ("git checkout optimizer_test.npy restores it" if Path(path).parent == HERE else
           "move it away: the project's own reference is then used, and python datasets.py --fetch puts the "
           "course's there")
    try:
        ref = np.load(path, allow_pickle=False)
    except ValueError as e:  # numpy's own words would advise allow_pickle, which runs code from the file
        npy = Path(path).read_bytes()[:6] == b"\x93NUMPY"
        why = ("it holds Python objects, which are never loaded" if npy and "pickle" in str(e)
               else "damaged, or not a NumPy .npy file")
        raise MinbertError(f"{path}: cannot read the reference weights ({why}); {fix}") from None
    except OSError as e:
        raise MinbertError(f"{path}: cannot read the reference weights ({e.strerror or e}); {fix}") from None
    if not isinstance(ref, np.ndarray) or ref.shape != (2, 3):
        raise MinbertError(f"{path}: not the optimizer test's reference (a [2, 3] array of weights); {fix}")
    return ref


def main(argv=None):
    # no flags, but --help must print what the script does and run nothing
    Parser(prog="optimizer_test.py", description=__doc__).parse_args(argv)
    path, words = reference()
    print(f"reference: {words}")
    ref = read_reference(path)
    # every path of our AdamW: the reference loop, the multi-tensor kernels, the fused pass (the default)
    for path in ({"foreach": False}, {"fused": False}, {}):
        actual = test_optimizer(AdamW, **path).numpy()
        if not np.allclose(ref, actual, atol=1e-6, rtol=1e-4):
            raise SystemExit(f"Optimizer test failed ({path or 'fused'}): max |diff| "
                             f"{np.abs(ref - actual).max():.3g}\nreference:\n{ref}\nyours:\n{actual}")
    print("Optimizer test passed!")


if __name__ == "__main__":
    main_guard(main)
