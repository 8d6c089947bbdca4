"""tools/make_optimizer_reference.py: optimizer_test.npy is what the independent NumPy reference computes; a file
holding anything else is never replaced."""
import numpy as np
import pytest

from minbert.cli import MinbertError
from tests.course import ROOT
from tests.processes import run_main
from tools import make_optimizer_reference


def test_reference_file_matches_its_generator():
    np.testing.assert_allclose(np.load(ROOT / "optimizer_test.npy"), make_optimizer_reference.reference_weights(), rtol=0, atol=1e-12)


def test_help_prints_what_the_tool_does_and_writes_nothing():
    before = (ROOT / "optimizer_test.npy").stat().st_mtime_ns
    out = run_main("tools/make_optimizer_reference.py", "--help")
    assert out.returncode == 0 and "usage: tools/make_optimizer_reference.py" in out.stdout and "wrote" not in out.stderr
    assert (ROOT / "optimizer_test.npy").stat().st_mtime_ns == before


def test_a_file_holding_other_weights_is_kept_and_one_line_says_so(tmp_path):
    out = tmp_path / "optimizer_test.npy"
    np.save(out, np.zeros((2, 3)))  # a user's file where the reference goes
    before = out.read_bytes()
    with pytest.raises(MinbertError, match=r"optimizer_test.npy: holds other weights than this computes .* nothing "
                                         r"was written"):
        make_optimizer_reference.main([], out=out)
    assert out.read_bytes() == before
    out.write_bytes(b"not numpy")
    with pytest.raises(MinbertError, match="holds other weights"):
        make_optimizer_reference.main([], out=out)
    out.unlink()
    make_optimizer_reference.main([], out=out)  # no file there: written
    np.testing.assert_allclose(np.load(out), make_optimizer_reference.reference_weights(), rtol=0, atol=1e-12)
    make_optimizer_reference.main([], out=out)  # the same weights again: written again, nothing lost
