"""runs/sources.py: which run wrote each file of an output folder is judged by its contents: a record deleted, or
edited to name another run, misleads nothing; a file edited by hand is no run's; a record the project did not write
is refused."""
import json

import pytest

from minbert.files import file_digest
from minbert.runs import outputs, sources
from tests.course import two_runs_published
from utils import MinbertError


def test_files_are_told_by_their_contents_not_by_the_record(tmp_path):
    """The record deleted, a file is still the project's when a run folder holds its bytes (so the run's own
    --resume is not refused); an entry edited to name another run is not believed; a file edited by hand is
    no run's."""
    pairs = two_runs_published(tmp_path)
    dest = pairs[0][1]
    (tmp_path / "predictions" / sources.SOURCES).unlink()
    assert sources.written_by(dest)["dir"] == str(tmp_path / "runs" / "a")
    outputs.check_outputs(files=[d for _, d in pairs])
    sources.record([dest], "b", tmp_path / "runs" / "b", files=[dest.name])  # a record that lies
    entries = json.loads((tmp_path / "predictions" / sources.SOURCES).read_text())
    entries[dest.name]["sha256"] = file_digest(dest)
    (tmp_path / "predictions" / sources.SOURCES).write_text(json.dumps(entries))
    assert [o["run"] for o in sources.origins(dest)] == ["a"]
    dest.write_text(dest.read_text() + "edited\n")
    assert sources.origins(dest) == []
    with pytest.raises(MinbertError, match="holds a file this project did not write"):
        outputs.check_outputs(files=[dest])


def test_a_record_the_project_did_not_write_is_refused(tmp_path):
    """A user's own .sources.json (or a link, a folder under that name) in an output folder would be replaced by
    the project's record: one line, nothing written."""
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / ".sources.json").write_text("my own notes, not JSON\n")
    with pytest.raises(MinbertError, match=r"out/.sources.json: not the record of written files this project keeps"):
        outputs.check_outputs(files=[folder / "sst-dev-output.csv"])
    (folder / ".sources.json").unlink()
    (folder / ".sources.json").mkdir()
    with pytest.raises(MinbertError, match=r"not the record of written files .* \(a link, a folder or a device"):
        outputs.check_file(folder / "x.json", "--json")
    with pytest.raises(MinbertError, match=r"--json .*/.sources.json: the name of the record the project keeps"):
        outputs.check_file(tmp_path / ".sources.json", "--json")
    assert sorted(p.name for p in folder.iterdir()) == [".sources.json"]


def test_a_record_that_cannot_be_replaced_stops_a_run_before_training(tmp_path, course_data, tiny_model,
                                                                      unwritable_file):
    """An immutable .sources.json in the folder a run publishes into: one line naming it before anything trains
    (every file written there updates it), not an error after the training; a zip still reads it."""
    import multitask_classifier as mt
    from tests.course import part2_args
    pred = tmp_path / "pred"
    pred.mkdir()
    (pred / "notes.csv").write_text("a tool's file\n")
    sources.record([pred / "notes.csv"], "a tool")
    unwritable_file(pred / sources.SOURCES)
    with pytest.raises(MinbertError, match=r"pred/.sources.json: the record of which files the project wrote in "
                                           r"that folder, .* cannot be replaced"):
        mt.main(part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "2"))
    assert not (tmp_path / "ck").exists()
    sources.check_record(pred, replace=False)
