"""minbert/submit.py: a project's table decides where the predictions are, what each part needs, and which check
each kind of file gets (ids by default, and each value one of the task's)."""
import pytest

from minbert.cli import MinbertError
from minbert.course_data import data_file, read_examples
from minbert.scoring import write_predictions
from minbert.submit import Project, problems_with
from tests.course import write_course_data


def test_each_file_gets_the_check_of_its_kind(tmp_path):
    write_course_data(tmp_path / "data")
    (tmp_path / "out").mkdir()
    ids = [e.id for e in read_examples(data_file(tmp_path / "data", "sst", "dev"), "sst", "dev")]
    write_predictions(tmp_path / "out" / "x-sst-dev-out.csv", "sst", ids[:-1], [1] * (len(ids) - 1))
    (tmp_path / "out" / "poems.txt").write_text("one\ntwo\n")
    seen = []
    checks = {".txt": lambda path, data: seen.append(path.name) or "too short"}
    bad = problems_with(tmp_path, ["x-sst-dev-out.csv", "poems.txt", "absent.csv"], tmp_path / "data", "out", checks)
    assert bad[0].startswith("out/x-sst-dev-out.csv (") and "1 missing" in bad[0]
    assert bad[1:] == ["out/poems.txt (too short)", "out/absent.csv (missing)"] and seen == ["poems.txt"]
    assert Project("p", "out", {}, {}, (), "run it").checks is None


@pytest.mark.parametrize("task, value, problem", [("sts", float("nan"), "outside STS's similarity range"),
                                                  ("sts", 9.9, "outside STS's similarity range"),
                                                  ("sst", 7, "not one of SST's classes")])
def test_a_prediction_no_task_could_hold_keeps_the_file_out_of_the_zip(tmp_path, task, value, problem):
    write_course_data(tmp_path / "data")
    (tmp_path / "out").mkdir()
    ids = [e.id for e in read_examples(data_file(tmp_path / "data", task, "dev"), task, "dev")]
    path = write_predictions(tmp_path / "out" / f"{task}-dev-output.csv", task, ids, [value] + [1] * (len(ids) - 1))
    with pytest.raises(MinbertError, match=f"{task}-dev-output.csv: line 2 \\(id {ids[0]}\\): prediction .* {problem}"):
        problems_with(tmp_path, [path.name], tmp_path / "data", "out", {})
