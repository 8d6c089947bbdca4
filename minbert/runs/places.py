"""Where in the project a path lies: among its code, docs and data (which no command writes), or in
the folders for what runs write. runs/folders.py keeps run folders out of the first;
runs/outputs.py keeps files out too."""
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[2]  # the project folder (where the scripts are)
OUTPUT_FOLDERS = ("predictions", "runs", "checkpoints", "reports", "pretrained")
SOURCE_FOLDERS = (".git", ".ci", "minbert", "gpt2", "tests", "tools", "docs", "benchmarks", "data")
SUBPROJECTS = ("gpt2",)  # folders whose scripts run from inside them, with output folders of their own


def project_parts(parts):
    """A path's parts relative to the project folder, with gpt2/'s own output folders (gpt2/runs/, ...) seen
    as the project's (runs/, ...)."""
    if parts[:1] and parts[0] in SUBPROJECTS and parts[1:2] and parts[1] in OUTPUT_FOLDERS:
        return parts[1:]
    return parts


def _inside(path):
    """`path`'s project_parts, or None when it lies outside the project folder."""
    path = Path(path).resolve()
    return project_parts(path.relative_to(PROJECT).parts) if path.is_relative_to(PROJECT) else None


def among_sources(path, root=True):
    """Whether `path` lies in one of the project's code, docs or data folders (or, with `root`, is
    the project folder itself)."""
    parts = _inside(path)
    return parts is not None and (parts[:1] == () and root or parts[:1] != () and parts[0] in SOURCE_FOLDERS)


def in_project(path):
    """Whether `path` lies in the project folder outside its output folders (a file
    of its code, docs or data)."""
    parts = _inside(path)
    return parts is not None and (not parts or parts[0] not in OUTPUT_FOLDERS)
