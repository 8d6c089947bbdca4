"""tools/mutation.py: a mutant is read against the code, run in a scratch copy, and judged by the tests' exit."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import mutation  # noqa: E402


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A two-file project: a function and the test that checks it."""
    (tmp_path / "calc.py").write_text("def add(a, b):\n    return a + b\n\n\ndef unused():\n    return 1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_calc.py").write_text(
        "import sys\nsys.path.insert(0, '.')\nfrom calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    monkeypatch.setattr(mutation, "ROOT", tmp_path)
    return tmp_path


def test_each_mutant_is_checked_against_the_code(project, tmp_path):
    spec = tmp_path / "mutants.txt"
    spec.write_text("# a comment\n\n"
                    "calc.py\ta + b\ta - b\tminus for plus\ttests/test_calc.py\n"
                    "calc.py\treturn\treturn None or\tambiguous\n"  # 'return' twice in calc.py: left out
                    "calc.py\tnot there\tx\tgone\n")
    rows = mutation.read_mutants(spec)
    assert [r[0] for r in rows] == [3, 4, 5]
    assert rows[0][5] == ["tests/test_calc.py"] and rows[1][5] is None and rows[2][5] is None
    spec.write_text("calc.py\ta + b\ta - b\n")
    with pytest.raises(SystemExit, match=r"line 1: 3 tab-separated fields"):
        mutation.read_mutants(spec)


def test_the_tests_run_are_the_ones_mirroring_the_file():
    assert mutation.mirrored_tests("minbert/reports/compare.py") == ["tests/minbert/reports"]
    assert mutation.mirrored_tests("minbert/hub.py") == ["tests/minbert/test_hub.py"]
    assert mutation.mirrored_tests("evaluation.py") == ["tests/test_evaluation.py"]
    assert mutation.mirrored_tests("gpt2/generation.py") == ["tests/gpt2/test_generation.py"]
    assert mutation.parse_only("1-3,7") == {1, 2, 3, 7}


def test_a_caught_bug_is_killed_an_uncaught_one_survives_and_the_file_is_restored(project):
    original = (project / "calc.py").read_text()
    caught = (1, "calc.py", "a + b", "a - b", "minus", ["tests/test_calc.py"])
    uncaught = (2, "calc.py", "return 1", "return 2", "dead code", ["tests/test_calc.py"])
    gone = (3, "calc.py", "x", "y", "changed", None)
    killed, survived, left = (mutation.run_one(project, m, timeout=120) for m in (caught, uncaught, gone))
    assert killed["status"] == "killed" and "test_add" in killed["detail"]
    assert survived["status"] == "survived" and left["status"] == "gone"
    assert (project / "calc.py").read_text() == original


def test_a_test_that_fails_without_the_mutant_kills_nothing(project):
    """The tests are run on the code as it is first: a test failing there makes the mutant's row an error, not a
    kill (a red suite would otherwise count every mutant it runs under as caught)."""
    (project / "tests" / "test_calc.py").write_text(
        "import sys\nsys.path.insert(0, '.')\nfrom calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 6\n")
    seen = {}

    def baseline(tests):
        if tuple(tests) not in seen:
            seen[tuple(tests)] = mutation.run_tests(project, tests, 120)[1]
        return seen[tuple(tests)]
    row = mutation.run_one(project, (1, "calc.py", "a + b", "a - b", "minus", ["tests/test_calc.py"]), 120, baseline)
    assert row["status"] == "error" and "the tests fail without the mutant: " in row["detail"]
    assert "test_add" in row["detail"]


def test_bad_input_is_one_line_and_the_mutants_file_is_never_written_over(project, tmp_path):
    from utils import MinbertError
    spec = tmp_path / "mutants.txt"
    spec.write_text("calc.py\ta + b\ta - b\tminus\n")
    before = spec.read_text()
    with pytest.raises(MinbertError, match="the mutants file itself"):
        mutation.main([str(spec), "--out", str(spec)])
    with pytest.raises(MinbertError, match="no such mutants file"):
        mutation.main([str(tmp_path / "none.txt"), "--out", str(tmp_path / "o.csv")])
    with pytest.raises(MinbertError, match=r"argument --only: '5-2': line numbers as 1-10,14"):
        mutation.main([str(spec), "--out", str(tmp_path / "o.csv"), "--only", "5-2"])
    with pytest.raises(MinbertError, match="--only: no mutant on those lines"):
        mutation.main([str(spec), "--out", str(tmp_path / "o.csv"), "--only", "7"])
    assert spec.read_text() == before and not (tmp_path / "o.csv").exists()
    # the rule for every output, before any mutant runs: a user's file, a course data file, a folder (the first two
    # had been written over, the third a traceback after the mutant's tests)
    (tmp_path / "notes.csv").write_text("my notes\n")
    (tmp_path / "sts-dev.csv").write_text("id\tsentence1\tsentence2\tsimilarity\n")
    for out, said in (("notes.csv", "holds a file this project did not write"), ("sts-dev.csv", "named like a course "
                                                                                           "data file"),
                      (".", "is a folder")):
        with pytest.raises(MinbertError, match=said):
            mutation.main([str(spec), "--out", str(tmp_path / out)])
    assert (tmp_path / "notes.csv").read_text() == "my notes\n"
