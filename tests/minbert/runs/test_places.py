"""runs/places.py: the project's code, docs and data folders are told from its output folders and from paths
elsewhere."""
from minbert.runs.places import PROJECT, among_sources, in_project


def test_code_docs_and_data_are_told_from_outputs_and_elsewhere(tmp_path):
    assert in_project(PROJECT / "bert.py") and in_project(PROJECT / "data" / "ids-sst-dev.csv")
    assert not in_project(PROJECT / "predictions" / "sst-dev-output.csv") and not in_project(PROJECT / "runs" / "a")
    assert not in_project(tmp_path / "bert.py")
    assert among_sources(PROJECT / "minbert" / "x") and among_sources(PROJECT / "docs")
    assert among_sources(PROJECT) and not among_sources(PROJECT, root=False)
    assert not among_sources(PROJECT / "my-run") and not among_sources(PROJECT / "runs" / "x")
    assert not among_sources(tmp_path)


def test_gpt2s_own_output_folders_are_outputs():
    assert not among_sources(PROJECT / "gpt2" / "runs" / "x") and not in_project(PROJECT / "gpt2" / "predictions" / "a.csv")
    assert among_sources(PROJECT / "gpt2" / "models") and in_project(PROJECT / "gpt2" / "config.py")
