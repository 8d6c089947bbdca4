"""minbert/submit.py: a project's table decides where the predictions are, what each part needs, and which check
each kind of file gets (ids by default)."""
from evaluation import write_predictions
from minbert.course_data import data_file, read_examples
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
