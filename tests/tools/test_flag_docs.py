"""tools/flag_docs.py: docs/flags.md is what the parsers say, on every machine."""
from tests.helpers import ROOT
from tools import flag_docs


def test_flags_page_equals_the_parsers(monkeypatch):
    # The page is the same on every machine: no default may come from the environment.
    for var in ("MINBERT_DATA", "MINBERT_CACHE", "MINBERT_HF_ENDPOINT", "HF_ENDPOINT"):
        monkeypatch.setenv(var, "/somewhere/else")
    assert (ROOT / "docs" / "flags.md").read_text() == flag_docs.render(), "run python tools/flag_docs.py"
