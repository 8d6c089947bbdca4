"""files.py: a torch whose restricted loader can run code opens nothing; a write on a full disk keeps the file
that was there."""
import pytest
import torch

from minbert import files
from minbert.runs.checkpoint import load_checkpoint
from utils import MinbertError


def test_a_torch_whose_restricted_loader_can_run_code_loads_nothing(tmp_path, monkeypatch):
    """Before torch 2.6, weights_only=True could be bypassed (CVE-2025-32434): such a torch never opens the file."""

    path = tmp_path / "ck.pt"
    torch.save({"w": torch.zeros(2)}, path)
    opened = []
    monkeypatch.setattr(files.torch, "load", lambda *a, **kw: opened.append(a))
    monkeypatch.setattr(files.torch, "__version__", "2.5.1+cu121")
    with pytest.raises(MinbertError, match=r"ck.pt: not loaded: torch 2.5.1\+cu121 can be made to run code .* install torch>=2.6"):
        load_checkpoint(path)
    assert opened == []
    assert files.torch_release("2.13.0+cpu") == (2, 13) and files.torch_release("2.6.0") >= files.SAFE_LOADER_TORCH


def test_atomic_write_on_a_full_disk_keeps_the_previous_file(tmp_path):
    import errno
    from minbert.files import atomic_write
    target = tmp_path / "f.bin"
    target.write_bytes(b"previous")

    def fill_then_fail(fp):
        fp.write(b"x" * 1000)
        raise OSError(errno.ENOSPC, "No space left on device")
    with pytest.raises(MinbertError, match="f.bin: cannot write it: no space left on the device; the file there before"):
        atomic_write(target, fill_then_fail)
    assert target.read_bytes() == b"previous" and sorted(p.name for p in tmp_path.iterdir()) == ["f.bin"]


def test_text_lines_end_at_newline_only():
    from minbert.files import text_lines
    assert text_lines("") == [] and text_lines("a") == ["a"] and text_lines("a\n") == ["a"]
    assert text_lines("a\r\nb\n\n") == ["a", "b", ""]
    odd = "\v\f\x1c\x1d\x1e\x85\u2028\u2029\r"  # str.splitlines breaks at each of these
    assert text_lines(f"x{odd}y\nz") == [f"x{odd}y", "z"]


def test_a_path_that_exists_but_is_no_regular_file_is_said_to_be_what_it_is(tmp_path):
    """--sst_train /dev/null exists: "not found" would mislead; a named pipe would block the reader."""
    import os

    from minbert.course_data import read_examples
    with pytest.raises(MinbertError, match=r"^/dev/null: is a character device, not a regular file; give the data file"):
        read_examples("/dev/null", "sst", "train")
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "link").symlink_to(tmp_path / "gone")
    for name, kind in (("pipe", "a named pipe"), ("link", r"a broken link \(its target is missing\)")):
        with pytest.raises(MinbertError, match=rf"--texts .*{name}: is {kind}, not a regular file; give the text file"):
            files.require_file(tmp_path / name, f"--texts {tmp_path / name}", "text file")
    with pytest.raises(MinbertError, match=r"nope: text file not found \(make it\)"):
        files.require_file(tmp_path / "nope", str(tmp_path / "nope"), "text file", "make it")
