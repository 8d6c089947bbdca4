"""TODO"""
import sys

import numpy as np

from tests.helpers import ROOT


def test_reference_file_matches_its_generator():
    sys.path.insert(0, str(ROOT / "tools"))
    from make_optimizer_reference import reference_weights
    np.testing.assert_allclose(np.load(ROOT / "optimizer_test.npy"), reference_weights(), rtol=0, atol=1e-12)
