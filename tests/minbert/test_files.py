"""files.py: a write on a full disk keeps the file that was there; a text file that is not one is named with its
line and byte; a path that is no regular file is said to be what it is; an unwritable folder is one line;
values kept plain."""
import pytest

from minbert import files
from utils import MinbertError


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


def test_a_file_that_is_not_utf8_text_names_its_line_and_byte(tmp_path):
    """A sonnets file saved as Latin-1 (one é on line 3): that line and byte, and what to do; a file holding a NUL
    byte is binary, not text; a folder is said to be one."""
    from minbert.course_data import read_sonnets
    from minbert.files import read_text
    sonnets = tmp_path / "sonnets.txt"
    sonnets.write_bytes("Sonnets\n\n1\nFrom fairest creatures\n".encode() + "we desire caf\u00e9\n".encode("latin-1"))
    with pytest.raises(MinbertError, match=r"sonnets.txt: line 5: byte 0xE9 is not UTF-8 text \(save the sonnets file "
                                           r"as UTF-8\)$"):
        read_sonnets(sonnets)
    (tmp_path / "b").write_bytes(b"text\n\x00\xff")
    with pytest.raises(MinbertError, match=r"b: not a text file, so not a table \(a NUL byte on line 2\)$"):
        read_text(tmp_path / "b", "table")
    (tmp_path / "b").write_bytes(b"text\nmore\x00text\n")  # valid UTF-8, yet no text: NUL would reach a sentence
    with pytest.raises(MinbertError, match=r"b: not a text file, so not a table \(a NUL byte on line 2\)$"):
        read_text(tmp_path / "b", "table")
    with pytest.raises(MinbertError, match=r"is a folder, not a table"):
        read_text(tmp_path, "table")
    sonnets.write_text("Sonnets\n\n1\nwe desire caf\u00e9\n", encoding="utf-8")
    assert read_sonnets(sonnets) == [("1", "we desire caf\u00e9")]


def test_a_file_that_cannot_be_read_is_one_line(tmp_path, monkeypatch):
    """No permission (a file copied from another account, say): one line naming it and why, not a traceback.
    (Simulated: root, which runs some containers, reads any file.)"""
    from pathlib import Path
    from minbert.files import read_text
    (tmp_path / "locked.csv").write_text("id\tsentence\n")

    def denied(self):
        raise PermissionError(13, "Permission denied", str(self))
    monkeypatch.setattr(Path, "read_bytes", denied)
    with pytest.raises(MinbertError, match=r"locked.csv: cannot read the data file: permission denied$"):
        read_text(tmp_path / "locked.csv", "data file")


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


def test_writable_problem_agrees_with_a_write(tmp_path, unwritable):
    """The check tries a write rather than read the mode bits: as root, a folder of mode 555 takes files (no problem
    is reported, and a write indeed succeeds), an immutable one does not; a folder not made yet is judged by the
    nearest one above it; nothing is left behind."""
    from minbert.files import writable_problem

    def writes(folder):
        try:
            (folder / "x").write_text("x")
        except OSError:
            return False
        (folder / "x").unlink()
        return True
    modes = tmp_path / "mode555"
    modes.mkdir()
    modes.chmod(0o555)
    try:
        for folder in (tmp_path, modes, unwritable):
            assert (writable_problem(folder) is None) == writes(folder), folder
            assert not [p for p in folder.iterdir() if "write-check" in p.name]
    finally:
        modes.chmod(0o755)
    assert writable_problem(unwritable / "new" / "deeper") == writable_problem(unwritable)
    assert writable_problem(unwritable).startswith(f"cannot write in {unwritable}: ")
    assert writable_problem(tmp_path / "new" / "deeper") is None and not (tmp_path / "new").exists()


def _scripts(tmp_path, locked, data, model, gpt2_model):
    """The nine commands that wrote into a folder that refuses writes only after their work, each named by its
    flag (argv for the script's main)."""
    from tests.gpt2.test_sonnet_pipeline import sonnet_argv, sonnet_files
    from tests.course import part1_args, part2_args, pretrain_args
    return {
        "classifier.py --run_dir": ("classifier", part1_args(tmp_path, data, model, "--run_dir", str(locked / "run"))),
        "pretrain.py --out": ("pretrain", pretrain_args(tmp_path, model, locked / "pt")),
        "bench.py --json": ("bench", ["--pretrained", str(model), "--data_dir", str(data), "--data", "sst", "--steps", "2",
                                      "--json", str(locked / "b.json")]),
        "report.py --out": ("report", [str(tmp_path / "mt"), "--out", str(locked / "report")]),
        "ensemble.py --run_dir": ("ensemble", [str(tmp_path / "mt" / "mt.pt"), str(tmp_path / "copy.pt"), "--data_dir",
                                               str(data), "--run_dir",
                                               str(locked / "ens"), "--out", str(tmp_path / "ens-out")]),
        "multitask_classifier.py --results": ("multitask_classifier", part2_args(
            tmp_path / "second", data, model, "--results", str(locked / "results.csv"))),
        "tools/collect_logs.py --out": ("tools.collect_logs", [str(tmp_path / "mt"), "--out", str(locked / "x.csv")]),
        "gpt2/sonnet_generation.py --run_dir": ("gpt2.sonnet_generation", sonnet_argv(
            tmp_path, gpt2_model, sonnet_files(tmp_path / "sonnets"), "--run_dir", str(locked / "son"))),
        "datasets.py --fetch --dest": ("datasets", ["--fetch", "--from", str(data), "--dest", str(locked / "data")]),
    }


def test_a_folder_that_refuses_writes_is_one_line_before_any_work(tmp_path, unwritable, course_data, tiny_model,
                                                                    tiny_gpt2, monkeypatch):
    """Each of the nine stops before it trains, times or reads anything, naming the folder; before, each ended in
    a PermissionError traceback (after the work, for --results)."""
    import importlib
    import multitask_classifier
    from minbert.training.trainer import Trainer
    from tests.course import part2_args
    multitask_classifier.main(part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "1",
                                         "--checkpoint", str(tmp_path / "mt" / "mt.pt")))  # what report etc. read
    (tmp_path / "copy.pt").write_bytes((tmp_path / "mt" / "mt.pt").read_bytes())  # an ensemble's second member
    trained = []
    monkeypatch.setattr(Trainer, "run_epoch", lambda *a, **kw: trained.append(1))
    for what, (module, argv) in _scripts(tmp_path, unwritable, course_data, tiny_model, tiny_gpt2).items():
        with pytest.raises(MinbertError) as e:
            importlib.import_module(module).main(argv)
        flag = what.split(" ")[-1]
        assert str(e.value).startswith(f"{flag} {unwritable}/") and f": cannot write in {unwritable}: " in str(e.value), what
    assert trained == [] and not any(unwritable.iterdir())


def test_the_command_line_says_it_in_one_line(tmp_path, unwritable, course_data, tiny_model):
    from tests.course import part1_args
    from tests.processes import one_line_error, run_main
    out = run_main("classifier.py", *part1_args(tmp_path, course_data, tiny_model, "--run_dir", str(unwritable / "run")))
    one_line_error(out, rf"--run_dir {unwritable}/run: cannot write in {unwritable}: .*; make it writable, or name a "
                        r"folder that is")


def test_plain_values_only():
    """Checkpoints and logs hold plain values: paths as strings, tuples and sets as lists (a set sorted), numpy
    scalars as numbers, tensors as they are; anything else is refused."""
    import pathlib

    import numpy as np
    import torch
    value = {"a": pathlib.Path("x"), "b": (1, 2), "c": {3, 1}, "d": np.float32(0.5), "e": torch.ones(2)}
    out = files.plain(value)
    assert {k: out[k] for k in "abcd"} == {"a": "x", "b": [1, 2], "c": [1, 3], "d": 0.5} and out["e"] is value["e"]
    with pytest.raises(TypeError, match="not plain data"):
        files.plain({"f": object()})


def test_a_text_file_that_is_not_there_is_one_line(tmp_path):
    """Every reader of a user's text file goes through read_text: a missing one (pretrain.py --corpus sonnets
    without DATA_DIR/sonnets.txt) is one line, not FileNotFoundError."""
    with pytest.raises(MinbertError, match=r"sonnets.txt: sonnets file not found$"):
        files.read_text(tmp_path / "sonnets.txt", "sonnets file")


def test_first_repeated_knows_a_path_spelled_two_ways(tmp_path, monkeypatch):
    from minbert.files import first_repeated
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.pt").write_text("")
    assert first_repeated(["a.pt", "b.pt", f"{tmp_path}/./a.pt"]) == f"{tmp_path}/./a.pt"
    assert first_repeated(["a.pt", "b.pt", "sub/a.pt"]) is None and first_repeated([]) is None
