"""setup.sh: a step that fails ends the script with its status, never with "setup done".

The venv is a stand-in (MINBERT_VENV names a folder whose bin/python is a shell script), so nothing is
installed: the stand-in accepts every pip call and fails the data step, as an offline machine does.
"""
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def offline_venv(tmp_path):
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    py = bin_dir / "python"
    py.write_text('#!/usr/bin/env bash\n'
                  'case "$1" in datasets.py) echo "Error: cannot reach the course repository" >&2; exit 1 ;; esac\n'
                  'exit 0\n')
    py.chmod(0o755)
    (bin_dir / "activate").write_text("")
    return tmp_path / "venv"


def _setup(venv, how):
    env = {k: v for k, v in os.environ.items() if k != "MINBERT_DATA"}
    env.update(MINBERT_VENV=str(venv), MINBERT_TORCH="skip")
    cmd = "bash setup.sh" if how == "run" else "source setup.sh; echo sourced-status=$?"
    return subprocess.run(["bash", "-c", cmd], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("how", ["run", "source"])
def test_a_failed_data_step_fails_setup(offline_venv, how):
    r = _setup(offline_venv, how)
    assert "cannot reach" in r.stderr
    assert "setup done" not in r.stdout + r.stderr
    if how == "run":
        assert r.returncode == 1
    else:
        assert "sourced-status=1" in r.stdout  # `source` returns the failure and leaves the shell running


def test_setup_completes_when_every_step_succeeds(offline_venv, tmp_path):
    (offline_venv / "bin" / "python").write_text("#!/usr/bin/env bash\nexit 0\n")
    r = _setup(offline_venv, "run")
    assert r.returncode == 0, r.stderr
    assert "setup done" in r.stdout
