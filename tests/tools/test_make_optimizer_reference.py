"""tools/make_optimizer_reference.py: optimizer_test.npy is what the independent NumPy reference computes."""
import numpy as np

from tests.course import ROOT
from tests.processes import run_main
from tools import make_optimizer_reference


def test_reference_file_matches_its_generator():
    np.testing.assert_allclose(np.load(ROOT / "optimizer_test.npy"), make_optimizer_reference.reference_weights(), rtol=0, atol=1e-12)


def test_help_prints_what_the_tool_does_and_writes_nothing():
    before = (ROOT / "optimizer_test.npy").stat().st_mtime_ns
    out = run_main("tools/make_optimizer_reference.py", "--help")
    assert out.returncode == 0 and "usage: make_optimizer_reference.py" in out.stdout and "wrote" not in out.stderr
    assert (ROOT / "optimizer_test.npy").stat().st_mtime_ns == before
