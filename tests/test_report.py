"""report.py on tiny generated runs: the files appear as valid PNGs of the stated size, the numbers in the
figures are the ones a hand count or evaluation.py gives, and bad logs are one line."""
import subprocess
import sys

import pytest

import report
from tests.course import ROOT, make_multitask_run
from utils import MinbertError


def test_missing_or_truncated_log_is_one_line(tmp_path):
    run, _ = make_multitask_run(tmp_path / "r")
    with open(run / "multitask.jsonl", "a") as fp:
        fp.write('{"epoch": 3, "train_lo')
    with pytest.raises(MinbertError, match=r"multitask.jsonl: line 4: truncated or not JSON"):
        report.main([str(run), "--out", str(tmp_path / "out")])
    out = subprocess.run([sys.executable, "report.py", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o")],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2 and out.stderr.strip() == f"error: {tmp_path / 'nope.jsonl'}: log not found"
