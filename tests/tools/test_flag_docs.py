"""tools/flag_docs.py: docs/flags.md is what the parsers say, on every machine."""
from tests.course import ROOT
from tools import flag_docs


def test_flags_page_equals_the_parsers(monkeypatch):
    # The page is the same on every machine: no default may come from the environment.
    for var in ("MINBERT_DATA", "MINBERT_CACHE", "MINBERT_HF_ENDPOINT", "HF_ENDPOINT"):
        monkeypatch.setenv(var, "/somewhere/else")
    assert (ROOT / "docs" / "flags.md").read_text() == flag_docs.render(), "run python tools/flag_docs.py"


def test_every_gpt2_script_has_its_section():
    """README says every flag is on the page: each script of gpt2/ (a file run as __main__) has its section, from the
    parser that script parses with."""
    scripts = sorted(f"gpt2/{p.name}" for p in (ROOT / "gpt2").glob("*.py") if "__main__" in p.read_text())
    assert len(scripts) == 6
    listed = {script for script, _, _ in flag_docs.SCRIPTS}
    assert [s for s in scripts if s not in listed] == []
    page = (ROOT / "docs" / "flags.md").read_text()
    assert all(f"\n## {s}\n" in page for s in scripts)
    assert "| `--para_dev_out` |" in page and "| `--temperature` | 1.2 |" in page
