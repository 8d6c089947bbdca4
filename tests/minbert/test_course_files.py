"""course_files.py: the course files fetched and checked against their git blob ids, a differing download refused, a
differing local copy used and named, a copy cut short fetched again; the two reference files fetched beside them and
found there."""
import pytest

from minbert import course_files
from minbert.course_files import course_reference, fetch_data, fetch_references
from minbert.files import git_blob_id
from tests.processes import run_main
from utils import MinbertError


@pytest.fixture
def course(file_server, tmp_path, monkeypatch):
    files = {"a.csv": b"\tid\tsentence\tsentiment\n0\tx\t Hi .\t1\n", "b.csv": b"\tid\tsentence\n0\ty\t Yo .\n"}
    for name, data in files.items():
        file_server.files[f"/data/{name}"] = data
        (tmp_path / "local").mkdir(exist_ok=True)
        (tmp_path / "local" / name).write_bytes(data)
    blobs = {n: git_blob_id(tmp_path / "local" / n) for n in files}
    monkeypatch.setattr(course_files, "BLOB_IDS", blobs)
    monkeypatch.setenv("MINBERT_DATA_URL", file_server.url + "/data")
    return file_server, tmp_path


def test_fetch_downloads_verifies_and_skips_valid_files(course):
    server, tmp = course
    fetch_data(tmp / "data", log=lambda *_: None)
    assert (tmp / "data" / "a.csv").read_bytes() == server.files["/data/a.csv"]
    n = len(server.log)
    fetch_data(tmp / "data", log=lambda *_: None)
    assert len(server.log) == n  # present and valid: not fetched again


def test_fetch_refuses_a_download_that_differs(course):
    server, tmp = course
    server.files["/data/b.csv"] = b"tampered"
    with pytest.raises(MinbertError, match="b.csv: git blob id .* not installed"):
        fetch_data(tmp / "data", log=lambda *_: None)
    assert not (tmp / "data" / "b.csv").exists()


def test_fetch_from_local_folder_says_when_a_copy_differs(course):
    server, tmp = course
    (tmp / "local" / "a.csv").write_bytes(b"\tid\tsentence\tsentiment\n0\tz\t Sample .\t1\n")
    said = []
    fetch_data(tmp / "data", source=tmp / "local", log=said.append)
    assert server.log == []  # no network
    assert any("a.csv: differs from the course release" in s for s in said)
    (tmp / "local" / "b.csv").unlink()
    with pytest.raises(MinbertError, match="b.csv: data file not found"):
        fetch_data(tmp / "data2", source=tmp / "local", log=lambda *_: None)


def test_fetch_never_replaces_data_that_differs(course):
    """--fetch --from SMALL into a data/ holding other files (the full course files, or the user's own): one
    line before anything is copied, every file as it was; identical files are simply there already."""
    server, tmp = course
    dest = tmp / "data"
    dest.mkdir()
    (dest / "a.csv").write_bytes(b"the full course file\n")
    with pytest.raises(MinbertError, match=r"a.csv: already there and different from what --fetch would put there "
                                           r"\(1 of the 2 files differ\); data is never replaced"):
        fetch_data(dest, source=tmp / "local", log=lambda *_: None)
    assert sorted(p.name for p in dest.iterdir()) == ["a.csv"] and (dest / "a.csv").read_bytes() == b"the full course file\n"
    with pytest.raises(MinbertError, match="a.csv: already there and different"):  # a download would replace it too
        fetch_data(dest, log=lambda *_: None)
    assert server.log == [] and (dest / "a.csv").read_bytes() == b"the full course file\n"
    (dest / "a.csv").write_bytes((tmp / "local" / "a.csv").read_bytes())
    said = []
    fetch_data(dest, source=tmp / "local", log=said.append)
    assert "(1 fetched now)" in said[-1]


def test_fetch_offline_names_the_local_copy(course, monkeypatch):
    server, tmp = course
    monkeypatch.setenv("MINBERT_DATA_URL", "http://127.0.0.1:9/data")  # nothing listens on the discard port
    with pytest.raises(MinbertError, match=r"cannot reach .*; without a network, copy the course CSVs from a folder "
                                           r"that has them: MINBERT_DATA=DIR bash setup.sh"):
        fetch_data(tmp / "data", log=lambda *_: None)


def test_a_copy_interrupted_half_way_is_fetched_again(course, monkeypatch):
    """Ctrl-C while --fetch --from copies the second file: the first is complete, the second is not there at all
    (half of it would be "already there and different" and refused forever); the same command then completes."""
    server, tmp = course
    real = course_files.atomic_write

    def interrupted(path, write_fn, mode="wb"):
        if path.name == "b.csv":
            raise KeyboardInterrupt
        return real(path, write_fn, mode)
    with monkeypatch.context() as m:
        m.setattr(course_files, "atomic_write", interrupted)
        with pytest.raises(KeyboardInterrupt):
            fetch_data(tmp / "data", source=tmp / "local", log=lambda *_: None)
    assert sorted(p.name for p in (tmp / "data").iterdir()) == ["a.csv"]
    fetch_data(tmp / "data", source=tmp / "local", log=lambda *_: None)
    assert all((tmp / "data" / n).read_bytes() == (tmp / "local" / n).read_bytes() for n in ("a.csv", "b.csv"))


def test_a_copy_killed_half_way_is_tidied_and_a_ctrl_c_says_what_was_fetched(course, monkeypatch):
    """A kill mid-copy left .a.csv.RANDOM.tmp, which no later fetch removed; a Ctrl-C after a file had been
    written said the command had written nothing."""
    from minbert import cli
    _, tmp = course
    dest = tmp / "data"
    dest.mkdir()
    (dest / ".a.csv.0123abcd.tmp").write_bytes(b"half a fi")
    (dest / ".notes.0123abcd.tmp").write_text("another command's, or the user's\n")
    seen = []
    real = course_files.atomic_write
    monkeypatch.setattr(course_files, "atomic_write",
                        lambda *a, **k: seen.append(cli._INTERRUPT_HINT["text"]) or real(*a, **k))
    fetch_data(dest, tmp / "local", log=lambda *_: None)
    assert sorted(p.name for p in dest.iterdir()) == [".notes.0123abcd.tmp", "a.csv", "b.csv"]
    # as b.csv is written, a Ctrl-C would say a.csv is there whole
    assert seen[1] == f"1 of the course CSVs fetched into {dest} so far, each whole; the same command fetches the rest"


def test_the_reference_files_come_from_the_course_repositorys_root_checked(course, monkeypatch):
    """sanity_check.data and optimizer_test.npy sit at the root of the course repository, one folder above its
    data/; each is checked against its blob id, and a problem with one is a line that stops nothing."""
    server, tmp = course
    files = {"sanity_check.data": b"PK torch's zip", "optimizer_test.npy": b"\x93NUMPY weights"}
    for name, data in files.items():
        server.files[f"/{name}"] = data
        (tmp / name).write_bytes(data)
    monkeypatch.setattr(course_files, "REFERENCE_BLOB_IDS", {n: git_blob_id(tmp / n) for n in files})
    server.files["/optimizer_test.npy"] = b"tampered"
    said = []
    assert fetch_references(tmp / "data", log=said.append) == 1
    assert (tmp / "data" / "sanity_check.data").read_bytes() == files["sanity_check.data"]
    assert not (tmp / "data" / "optimizer_test.npy").exists()
    assert any("optimizer_test.npy: git blob id" in s and "not installed" in s for s in said)
    assert course_reference("sanity_check.data", tmp / "data")[1].startswith("the course's sanity_check.data, ")
    missing = f"the course's optimizer_test.npy is not in {tmp / 'data'}: python datasets.py --fetch puts it there"
    assert course_reference("optimizer_test.npy", tmp / "data") == (None, missing)
    (tmp / "data" / "optimizer_test.npy").write_bytes(b"the user's own")
    path, words = course_reference("optimizer_test.npy", tmp / "data")
    assert path == tmp / "data" / "optimizer_test.npy"
    assert ", not the course's optimizer_test.npy (git blob " in words


def test_fetch_writes_regular_files_and_never_into_the_package(course):
    """A named pipe or a dangling link where a course file goes, or where --dest's folder goes, is one line
    before anything is copied (it stays what it was); --dest minbert (or the project folder), a run's folder or
    predictions/ too: the course files go into data/ or outside."""
    import os
    _, tmp = course
    dest = tmp / "dest"
    dest.mkdir()
    if not hasattr(os, "mkfifo"):
        pytest.skip("no named pipes on this system")
    os.mkfifo(dest / "b.csv")
    with pytest.raises(MinbertError, match=r"--dest .*dest/b.csv: is a named pipe, not a regular file"):
        fetch_data(dest, tmp / "local", log=lambda *_: None)
    assert (dest / "b.csv").is_fifo() and not (dest / "a.csv").exists()
    (dest / "b.csv").unlink()
    os.symlink(tmp / "nowhere.csv", dest / "b.csv")
    with pytest.raises(MinbertError, match=r"--dest .*dest/b.csv: is a link to .*nowhere.csv \(which does not exist"):
        fetch_data(dest, tmp / "local", log=lambda *_: None)
    assert (dest / "b.csv").is_symlink() and not (dest / "a.csv").exists()
    os.symlink(tmp / "no-folder", tmp / "linked")  # --dest itself a dangling link: mkdir would meet the link
    with pytest.raises(MinbertError, match=r"--dest .*linked: is a link to a missing folder, but the course CSVs go "):
        fetch_data(tmp / "linked", tmp / "local", log=lambda *_: None)
    assert (tmp / "linked").is_symlink() and not (tmp / "no-folder").exists()
    (tmp / "afile").write_text("mine\n")  # a file above --dest: the folder it names cannot be made
    with pytest.raises(MinbertError, match=r"--dest .*afile/sub: .*afile is a file, but the course CSVs go into a "):
        fetch_data(tmp / "afile" / "sub", tmp / "local", log=lambda *_: None)
    assert (tmp / "afile").read_text() == "mine\n"
    for where in (course_files.PROJECT / "minbert", course_files.PROJECT):
        with pytest.raises(MinbertError, match=r"among the project's code, docs or data.*give data/ or a folder "):
            fetch_data(where, tmp / "local", log=lambda *_: None)
    assert not (course_files.PROJECT / "minbert" / "a.csv").exists() and not (course_files.PROJECT / "a.csv").exists()
    # a run's folder, or the project's output folders (predictions/ is what the zip holds): refused too
    from tests.course import mark_run
    (tmp / "run").mkdir()
    mark_run(tmp / "run", "multitask", {})
    with pytest.raises(MinbertError, match=r"^--dest .*run/sub: inside .*run, the folder of a run"):
        fetch_data(tmp / "run" / "sub", tmp / "local", log=lambda *_: None)
    with pytest.raises(MinbertError, match=r"^--dest .*predictions: inside the project's predictions/, where "
                                           r"commands write their outputs"):
        fetch_data(course_files.PROJECT / "predictions", tmp / "local", log=lambda *_: None)
    assert not (tmp / "run" / "sub").exists() and not (course_files.PROJECT / "predictions" / "a.csv").exists()


def test_datasets_fetch_brings_the_reference_files_and_a_missing_one_stops_nothing(tmp_path, course_data):
    """`python datasets.py --fetch --from DIR` (setup.sh's step): the CSVs copied, and for each reference file
    DIR does not hold, one line; the set-up goes on."""
    out = run_main("datasets.py", "--fetch", "--from", str(course_data), "--dest", str(tmp_path / "dest"))
    assert out.returncode == 0, out.stderr
    assert f"{course_data / 'sanity_check.data'}: data file not found in {course_data}" in out.stdout
    assert "0 of the 2 course reference files there (0 fetched now)" in out.stdout  # none: said so
    assert (tmp_path / "dest" / "sts-dev.csv").is_file()
