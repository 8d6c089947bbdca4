"""minbert/project_paths.py: the project's code, docs and data folders are told from its output folders and from paths
elsewhere; an output is a regular file or nothing, writable, and never among the project's code."""
import pytest

from minbert.project_paths import PROJECT, among_sources, check_output, in_project
from utils import MinbertError


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


def _special(kind, path):
    """Make `path` a named pipe, a copy of /dev/null (a character device: root only), a dangling link or a link to
    a regular file; skipped where this machine cannot."""
    import os
    import subprocess
    if kind == "named pipe":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no named pipes on this system")
        os.mkfifo(path)
    elif kind == "character device":
        if subprocess.run(["mknod", str(path), "c", "1", "3"], capture_output=True).returncode:
            pytest.skip("mknod needs root")
    elif kind == "dangling link":
        os.symlink(path.parent / "nowhere.csv", path)
    else:
        (path.parent / "target.csv").write_text("the user's target\n")
        os.symlink(path.parent / "target.csv", path)
    return path


@pytest.mark.parametrize("kind", ["named pipe", "character device", "dangling link", "link to a file"])
def test_an_output_is_a_regular_file_or_nothing(tmp_path, kind):
    """A pipe, a device or a link given as an output is one line naming what it is, and stays what it was (a link is
    refused even to a regular file: the write would land where it points, or replace the link)."""
    path = _special(kind, tmp_path / "sst-dev-output.csv")
    words = {"named pipe": "is a named pipe, not a regular file", "character device": "is a character device, not a "
             "regular file", "dangling link": r"is a link to .*nowhere.csv \(which does not exist\)",
             "link to a file": "is a link to .*target.csv; outputs are regular files only"}[kind]
    with pytest.raises(MinbertError, match=rf"^--sst_dev_out .*sst-dev-output.csv: {words}"):
        check_output(path, f"--sst_dev_out {path}")
    assert path.is_symlink() or path.is_fifo() or path.is_char_device()


def test_a_file_that_cannot_be_replaced_or_appended_to_is_one_line(tmp_path, unwritable_file):
    """An immutable (or write-protected) file is refused before any work, replaced or appended to alike."""
    path = tmp_path / "multitask-results.csv"
    path.write_text("run,mean\n")
    unwritable_file(path)
    for append in (False, True):
        with pytest.raises(MinbertError, match=rf"--results {path}: cannot be {'appended to' if append else 'replaced'}"
                                               r": (not permitted|permission denied).*; make it writable"):
            check_output(path, f"--results {path}", append=append)


def test_no_file_is_written_among_the_code_and_the_course_files_only_into_data(tmp_path):
    """minbert/ and gpt2/'s code take no output, the course files (datasets.py --fetch) go into data/ or outside the
    project, never into the package or the project folder itself."""
    for folder, data in ((PROJECT / "minbert", False), (PROJECT / "gpt2" / "models", False),
                         (PROJECT / "minbert", True), (PROJECT, True), (PROJECT / "data", False)):
        with pytest.raises(MinbertError, match="among the project's code, docs or data"):
            check_output(folder / "x.csv", "--out x.csv", data=data)
    check_output(PROJECT / "data" / "ids-sst-dev.csv.new", "--dest", data=True)
    check_output(PROJECT / "gpt2" / "predictions" / "para-dev-output.csv", "--para_dev_out")
    check_output(tmp_path / "new" / "x.csv", "--out")
