"""specs.py: checkpoints and logs hold plain values only."""
import pathlib

import pytest

from minbert.specs import plain


def test_plain_values_only():
    assert plain({"a": pathlib.Path("x"), "b": (1, 2), "c": {3, 1}}) == {"a": "x", "b": [1, 2], "c": [1, 3]}
    with pytest.raises(TypeError, match="not plain data"):
        plain({"f": object()})
