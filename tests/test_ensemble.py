"""ensemble.py: it takes only the speed flags inference uses."""
import pytest

from utils import MinbertError


def test_ensemble_takes_only_the_speed_flags_inference_uses():
    import ensemble
    with pytest.raises(MinbertError, match="unrecognized arguments: --grad_accum"):
        ensemble.build_parser().parse_args(["a.pt", "--grad_accum", "2"])
    assert ensemble.build_parser().parse_args(["a.pt", "--amp", "none", "--attn", "explicit"]).amp == "none"
