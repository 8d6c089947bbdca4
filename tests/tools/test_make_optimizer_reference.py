"""tools/make_optimizer_reference.py: optimizer_test.npy is what the independent NumPy reference computes."""
import numpy as np

from tests.helpers import ROOT
from tools import make_optimizer_reference


def test_reference_file_matches_its_generator():
    np.testing.assert_allclose(np.load(ROOT / "optimizer_test.npy"), make_optimizer_reference.reference_weights(), rtol=0, atol=1e-12)
