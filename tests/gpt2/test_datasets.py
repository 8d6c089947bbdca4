"""gpt2/datasets.py: the sonnet files downloaded and checked, copied from a folder, never replacing other contents;
each problem one line, none fatal unless no file is there at the end."""
from gpt2 import datasets as gpt2_data
from minbert.files import git_blob_id


def _blobs(monkeypatch, tmp_path, server):
    local = tmp_path / "local"
    local.mkdir()
    for name in gpt2_data.SONNET_BLOB_IDS:
        (local / name).write_text(f"Sonnets\n\n1\nthe text of {name}\n")
        server.files[f"/gpt2/{name}"] = (local / name).read_bytes()
    monkeypatch.setattr(gpt2_data, "SONNET_BLOB_IDS", {n: git_blob_id(local / n) for n in gpt2_data.SONNET_BLOB_IDS})
    monkeypatch.setenv("MINBERT_GPT2_DATA_URL", server.url + "/gpt2")
    return local


def test_download_copy_and_keep(tmp_path, file_server, monkeypatch):
    local = _blobs(monkeypatch, tmp_path, file_server)
    said = []
    assert gpt2_data.fetch_sonnets(tmp_path / "data", log=said.append) == 4
    assert (tmp_path / "data" / "sonnets.txt").read_bytes() == (local / "sonnets.txt").read_bytes()
    file_server.files["/gpt2/sonnets_held_out.txt"] = b"tampered"
    (tmp_path / "d2").mkdir()
    (tmp_path / "d2" / "sonnets.txt").write_text("the user's own\n")
    said = []
    assert gpt2_data.fetch_sonnets(tmp_path / "d2", log=said.append) == 2
    assert (tmp_path / "d2" / "sonnets.txt").read_text() == "the user's own\n"
    assert any("sonnets.txt: already there with other contents, kept" in s for s in said)
    assert any("sonnets_held_out.txt: git blob id" in s and "not installed" in s for s in said)
    assert not (tmp_path / "d2" / "sonnets_held_out.txt").exists()
    n = len(file_server.log)
    assert gpt2_data.fetch_sonnets(tmp_path / "d3", source=local, log=said.append) == 4 and len(file_server.log) == n


def test_a_fetch_that_leaves_no_sonnet_file_there_is_one_line_and_fails(tmp_path, capsys):
    """Each missing file is a line and the fetch goes on (set-up does not stop for the sonnets); but a
    `--fetch` after which none of them is there has done nothing, and says so with exit code 2."""
    import pytest
    from utils import MinbertError
    (tmp_path / "empty").mkdir()
    with pytest.raises(MinbertError, match=r"--dest .*dest: none of the 4 sonnet files is there after the fetch"):
        gpt2_data.main(["--fetch", "--from", str(tmp_path / "empty"), "--dest", str(tmp_path / "dest")])
    assert capsys.readouterr().out.count("data file not found in") == 4


def test_from_or_dest_without_fetch_is_one_line_not_the_help(tmp_path, capsys):
    """Without --fetch they would change nothing, and printing the help with exit code 0 would hide that."""
    import pytest
    from utils import MinbertError
    for flag in ("--from", "--dest"):
        with pytest.raises(MinbertError, match=rf"^{flag} belongs to --fetch: as given it would change nothing; add "
                                               r"--fetch"):
            gpt2_data.main([flag, str(tmp_path)])
    assert capsys.readouterr().out == "" and list(tmp_path.iterdir()) == []
    gpt2_data.main([])  # nothing asked: the help
    assert "--fetch" in capsys.readouterr().out
