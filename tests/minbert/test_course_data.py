"""course_data.py: rows end at \\n only (a line separator inside a sentence stays in it); the course files fetched
and checked against their git blob ids, a differing download refused, a differing local copy used and named; the two
reference files fetched beside them and found there."""
import pytest

from minbert import course_data
from minbert.course_data import course_reference, fetch_data, fetch_references
from minbert.files import git_blob_id
from tests.processes import cli
from utils import MinbertError


@pytest.fixture
def course(file_server, tmp_path, monkeypatch):
    files = {"a.csv": b"\tid\tsentence\tsentiment\n0\tx\t Hi .\t1\n", "b.csv": b"\tid\tsentence\n0\ty\t Yo .\n"}
    for name, data in files.items():
        file_server.files[f"/data/{name}"] = data
        (tmp_path / "local").mkdir(exist_ok=True)
        (tmp_path / "local" / name).write_bytes(data)
    blobs = {n: git_blob_id(tmp_path / "local" / n) for n in files}
    monkeypatch.setattr(course_data, "BLOB_IDS", blobs)
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


# Characters str.splitlines breaks a line at but a CSV file does not end a row at.
NOT_ROW_ENDS = ["\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("char", NOT_ROW_ENDS, ids=[f"U+{ord(c):04X}" for c in NOT_ROW_ENDS])
def test_a_line_break_character_inside_a_sentence_stays_in_it(tmp_path, char):
    sst = tmp_path / "ids-sst-train.csv"
    sst.write_text(f"\tid\tsentence\tsentiment\n0\ta1\t Fine .\t3\n1\ta2\t A {char}lovely film .\t4\r\n2\ta3\t Dull .\t1\n")
    ex = course_data.read_examples(sst, "sst", "train")
    assert [(e.id, e.texts, e.label, e.line) for e in ex] == [
        ("a1", ("Fine .",), 3, 2), ("a2", (f"A {char}lovely film .",), 4, 3), ("a3", ("Dull .",), 1, 4)]
    quora = tmp_path / "quora-dev.csv"
    quora.write_text(f"\tid\tsentence1\tsentence2\tis_duplicate\n0\tq1\tHow{char}?\tWhy?\t1\n1\tq2\tA\tB\t0\n")
    ex = course_data.read_examples(quora, "quora", "dev", log=pytest.fail)
    assert [(e.id, e.texts, e.label) for e in ex] == [("q1", (f"How{char}?", "Why?"), 1), ("q2", ("A", "B"), 0)]
    bad = tmp_path / "ids-sst-dev.csv"  # a real error after the character is blamed on its own line
    bad.write_text(f"\tid\tsentence\tsentiment\n0\ta1\t A {char}film .\t3\n1\ta2\t Dull .\tfive\n")
    with pytest.raises(MinbertError, match=rf"{bad}: line 3: sentiment 'five' is not a number"):
        course_data.read_examples(bad, "sst", "dev")


def test_a_lone_carriage_return_is_named_on_its_line(tmp_path):
    path = tmp_path / "ids-sst-train.csv"
    path.write_text("\tid\tsentence\tsentiment\n0\ta1\t Fine .\t3\n1\ta2\t A\rfilm .\t4\n", newline="")
    with pytest.raises(MinbertError, match=r"line 3: a carriage return \(\\r\) inside the row; remove it"):
        course_data.read_examples(path, "sst", "train")
    path.write_text('\tid\tsentence\tsentiment\n0\ta1\t"A\rfilm ."\t4\n', newline="")  # quoted: text
    assert course_data.read_examples(path, "sst", "train")[0].texts == ("A\rfilm .",)


def test_a_copy_interrupted_half_way_is_fetched_again(course, monkeypatch):
    """Ctrl-C while --fetch --from copies the second file: the first is complete, the second is not there at all
    (half of it would be "already there and different" and refused forever); the same command then completes."""
    server, tmp = course
    real = course_data.atomic_write

    def interrupted(path, write_fn, mode="wb"):
        if path.name == "b.csv":
            raise KeyboardInterrupt
        return real(path, write_fn, mode)
    with monkeypatch.context() as m:
        m.setattr(course_data, "atomic_write", interrupted)
        with pytest.raises(KeyboardInterrupt):
            fetch_data(tmp / "data", source=tmp / "local", log=lambda *_: None)
    assert sorted(p.name for p in (tmp / "data").iterdir()) == ["a.csv"]
    fetch_data(tmp / "data", source=tmp / "local", log=lambda *_: None)
    assert all((tmp / "data" / n).read_bytes() == (tmp / "local" / n).read_bytes() for n in ("a.csv", "b.csv"))


def test_the_reference_files_come_from_the_course_repositorys_root_checked(course, monkeypatch):
    """sanity_check.data and optimizer_test.npy sit at the root of the course repository, one folder above its
    data/; each is checked against its blob id, and a problem with one is a line that stops nothing."""
    server, tmp = course
    files = {"sanity_check.data": b"PK torch's zip", "optimizer_test.npy": b"\x93NUMPY weights"}
    for name, data in files.items():
        server.files[f"/{name}"] = data
        (tmp / name).write_bytes(data)
    monkeypatch.setattr(course_data, "REFERENCE_BLOB_IDS", {n: git_blob_id(tmp / n) for n in files})
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


def test_datasets_fetch_brings_the_reference_files_and_a_missing_one_stops_nothing(tmp_path, course_data):
    """`python datasets.py --fetch --from DIR` (setup.sh's step): the CSVs copied, and for each reference file
    DIR does not hold, one line; the set-up goes on."""
    out = cli("datasets.py", "--fetch", "--from", str(course_data), "--dest", str(tmp_path / "dest"))
    assert out.returncode == 0, out.stderr
    assert f"{course_data / 'sanity_check.data'}: data file not found in {course_data}" in out.stdout
    assert "2 course reference files in" in out.stdout and (tmp_path / "dest" / "sts-dev.csv").is_file()
