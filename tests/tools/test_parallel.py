"""tools/parallel.py: a plan's runs N at a time, each one's output in its own log; {KEY} filled from --set, a key
not given named with the plan's line."""
import subprocess
import sys

from tests.helpers import ROOT
from tools import parallel


def test_a_plan_runs_every_line_and_fills_its_keys(tmp_path):
    plan = tmp_path / "plan.txt"
    plan.write_text("# a comment\n\none {py} -c \"print('first {word}')\"\ntwo {py} -c \"print('second')\"\n")
    assert parallel.read_plan(plan, {"py": "python", "word": "x"})[0] == ("one", "python -c \"print('first x')\"")
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "parallel.py"), str(plan), "--jobs", "2", "--logs",
                          str(tmp_path / "logs"), "--set", f"py={sys.executable}", "word=hello"],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "logs" / "one.log").read_text().splitlines()[-1] == "first hello"
    assert (tmp_path / "logs" / "two.log").read_text().splitlines()[-1] == "second"
    assert "done one rc=0" in out.stdout and "done two rc=0" in out.stdout
    missing = subprocess.run([sys.executable, str(ROOT / "tools" / "parallel.py"), str(plan), "--logs",
                              str(tmp_path / "l2")], capture_output=True, text=True, timeout=300)
    assert missing.returncode == 1 and "plan.txt, line 3: 'py' is not given by --set" in missing.stderr


def test_a_missing_plan_is_one_line(tmp_path):
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "parallel.py"), str(tmp_path / "nope.txt"), "--logs",
                          str(tmp_path / "logs")], capture_output=True, text=True)
    assert out.returncode == 1 and out.stderr.strip() == f"error: {tmp_path / 'nope.txt'}: plan file not found"
