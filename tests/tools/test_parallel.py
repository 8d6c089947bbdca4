"""tools/parallel.py: a plan's runs N at a time, each one's output in its own log; {KEY} filled from --set, a key
not given named with the plan's line; bad flags and a name used twice are one line; a user's log is never replaced."""
import sys

from tests.processes import run_main
from tools import parallel


def test_a_plan_runs_every_line_and_fills_its_keys(tmp_path):
    plan = tmp_path / "plan.txt"
    plan.write_text("# a comment\n\none {py} -c \"print('first {word}')\"\ntwo {py} -c \"print('second')\"\n")
    assert parallel.read_plan(plan, {"py": "python", "word": "x"})[0] == ("one", "python -c \"print('first x')\"")
    out = run_main("tools/parallel.py", str(plan), "--jobs", "2", "--logs", str(tmp_path / "logs"), "--set",
                   f"py={sys.executable}", "word=hello")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "logs" / "one.log").read_text().splitlines()[-1] == "first hello"
    assert (tmp_path / "logs" / "two.log").read_text().splitlines()[-1] == "second"
    assert "done one rc=0" in out.stdout and "done two rc=0" in out.stdout
    missing = run_main("tools/parallel.py", str(plan), "--logs", str(tmp_path / "l2"))
    assert missing.returncode == 2 and "plan.txt, line 3: 'py' is not given by --set" in missing.stderr


def test_a_missing_plan_is_one_line(tmp_path):
    out = run_main("tools/parallel.py", str(tmp_path / "nope.txt"), "--logs", str(tmp_path / "logs"))
    assert out.returncode == 2 and out.stderr.strip() == f"error: {tmp_path / 'nope.txt'}: plan file not found"


def _parallel(*argv, cwd):
    return run_main("tools/parallel.py", *argv, cwd=cwd)


def test_bad_flags_and_plans_are_one_line_before_anything_runs(tmp_path):
    plan = tmp_path / "plan.txt"
    plan.write_text(f"one {sys.executable} -c \"open('ran', 'w')\"\n")
    for argv, line in ((["--set", "foo"], "error: --set foo: expected KEY=VALUE, e.g. --set py=python out=results"),
                       (["--jobs", "0"], "error: tools/parallel.py: argument --jobs: 0 must be an integer >= 1"),
                       (["--deadline", "-5"], "error: tools/parallel.py: argument --deadline: -5 must be a number > 0"),
                       (["--set", "k=1", "k=2"], "error: --set k=1 and k=2: the key k given twice; give it once")):
        out = _parallel(str(plan), "--logs", "logs", *argv, cwd=tmp_path)
        assert out.returncode == 2 and out.stderr.strip() == line, out.stderr
    for text, said in (("bad line without command\n", "plan.txt, line 1: run bad's program 'line' is not found"),
                       ("one echo 'unbalanced\n", "plan.txt, line 1: No closing quotation")):
        plan.write_text(text)
        out = _parallel(str(plan), "--logs", "logs", cwd=tmp_path)
        assert out.returncode == 2 and said in out.stderr and "Traceback" not in out.stderr, out.stderr
    twice = tmp_path / "twice.txt"
    twice.write_text("one echo a\n# the same name\none echo b\n")
    out = _parallel(str(twice), "--logs", "logs", cwd=tmp_path)
    assert out.returncode == 2 and "twice.txt, line 3: the run name one is on line 1 already" in out.stderr
    assert not (tmp_path / "ran").exists() and not (tmp_path / "logs").exists()


def test_a_log_the_tool_did_not_write_is_never_replaced(tmp_path):
    plan = tmp_path / "plan.txt"
    plan.write_text(f"one {sys.executable} -c \"print('hello')\"\n")
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "one.log").write_text("my notes\n")
    out = _parallel(str(plan), "--logs", "logs", cwd=tmp_path)
    assert out.returncode == 2 and "--logs logs/one.log: holds a file this project did not write" in out.stderr
    assert (tmp_path / "logs" / "one.log").read_text() == "my notes\n"
    (tmp_path / "logs" / "one.log").unlink()
    for _ in range(2):  # its own log, it replaces when the plan runs again
        assert _parallel(str(plan), "--logs", "logs", cwd=tmp_path).returncode == 0
        assert (tmp_path / "logs" / "one.log").read_text().splitlines()[-1] == "hello"


def test_a_plan_without_a_run_is_one_line(tmp_path):
    plan = tmp_path / "empty.csv"
    plan.write_text("# nothing yet\n\n")
    out = run_main("tools/parallel.py", str(plan), "--logs", str(tmp_path / "logs"))
    assert out.returncode == 2 and out.stderr.strip().endswith("empty.csv: no run in this plan (each line NAME "
                                                               "COMMAND; blank lines and # comments are skipped)")
    assert not (tmp_path / "logs").exists()
    plan.write_text("alone\n")
    out = run_main("tools/parallel.py", str(plan), "--logs", str(tmp_path / "logs"))
    assert out.returncode == 2 and out.stderr.strip().endswith("empty.csv, line 1: run alone has no command (each line "
                                                               "NAME COMMAND)")
    # a run name that would put its log outside --logs (into a data folder, say): refused before any run
    for name in ("../evil", "/tmp/abs", ".hidden"):
        plan.write_text(f"{name} echo x\n")
        out = run_main("tools/parallel.py", str(plan), "--logs", str(tmp_path / "logs"))
        assert out.returncode == 2 and "give a plain name" in out.stderr, out.stderr
    assert not (tmp_path / "evil.log").exists() and not (tmp_path / "logs").exists()


def test_a_run_that_fails_or_misses_the_deadline_makes_the_plan_fail_naming_it(tmp_path):
    """Each run's end is said once; the tool's exit status and one line name every run that did not end with
    exit code 0, so a script running the plan sees it."""
    plan = tmp_path / "plan.txt"
    plan.write_text(f"ok {sys.executable} -c \"print('fine')\"\nbad {sys.executable} -c \"import sys; sys.exit(3)\"\n")
    out = _parallel(str(plan), "--logs", "logs", cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip() == (
        "error: 1 of the plan's 2 runs did not end with exit code 0: bad (rc=3); their logs are in logs")
    late = tmp_path / "late.txt"
    late.write_text(f"slow {sys.executable} -c \"import time; time.sleep(60)\"\nnext {sys.executable} -c \"print(1)\"\n")
    out = _parallel(str(late), "--logs", "logs2", "--jobs", "1", "--deadline", "2", cwd=tmp_path)
    assert out.returncode == 2 and out.stderr.strip() == (
        "error: 2 of the plan's 2 runs did not end with exit code 0: slow (stopped), next (skipped); their logs "
        "are in logs2")
    assert out.stdout.count("stopped slow: deadline") == 1 and "skipped next: deadline" in out.stdout
