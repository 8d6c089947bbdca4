"""tools/gpu_check.sh's arguments, in a copy of it in a folder of its own (it writes under the project folder it
sits in): --help prints what it runs, its settings and where it writes, and writes nothing; an argument it does not
take is one line, exit 2, and writes nothing; without arguments it goes on as before (here as far as its check of
MODEL, which needs no GPU)."""
import os
import shutil
import subprocess

import pytest

from tests.course import ROOT, snapshot


@pytest.fixture
def project(tmp_path):
    """A folder holding tools/gpu_check.sh alone, as the project folder it cds to."""
    (tmp_path / "tools").mkdir()
    shutil.copy(ROOT / "tools" / "gpu_check.sh", tmp_path / "tools" / "gpu_check.sh")
    return tmp_path


SETTINGS = ("MODEL", "DATA", "BUDGET", "STAGES", "OUT")  # the script's, left out of the environment unless given


def _run(project, *args, **env):
    inherited = {k: v for k, v in os.environ.items() if k not in SETTINGS}
    return subprocess.run(["bash", "tools/gpu_check.sh", *args], cwd=project, capture_output=True, text=True,
                          timeout=60, env={**inherited, **env})


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_prints_the_usage_and_writes_nothing(project, flag):
    before = snapshot(project)
    for env in ({}, {"OUT": str(project / "out")}):
        out = _run(project, flag, **env)
        assert out.returncode == 0 and out.stderr == ""
        assert out.stdout.startswith("The GPU checks of the recorded training step")
        for said in ("$OUT (default gpu-check/", "-h/--help", "STAGES", "MODEL:", "part2-compile", "summary.txt"):
            assert said in out.stdout, said
        assert "#" not in out.stdout.split("\n")[0] and "set -uo" not in out.stdout
        assert snapshot(project) == before and sorted(p.name for p in project.iterdir()) == ["tools"]


@pytest.mark.parametrize("args", [["--bogus"], ["--stages", "tests"], ["tests"], ["tests", "--help"]])
def test_an_argument_it_does_not_take_is_one_line_and_writes_nothing(project, args):
    before = snapshot(project)
    out = _run(project, *args, OUT=str(project / "out"))
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith(f"tools/gpu_check.sh: {args[0]}: not an option")
    assert snapshot(project) == before and sorted(p.name for p in project.iterdir()) == ["tools"]


def test_without_arguments_it_runs_as_before(project):
    """No argument: the run starts, writing under $OUT (by default gpu-check/ in the project folder), and stops at
    its MODEL check (no MiniLM folder here) before any GPU work."""
    out = _run(project, MODEL=str(project / "no-model"))
    assert out.returncode == 2 and "no vocab.txt there" in out.stdout
    assert (project / "gpu-check" / "summary.txt").read_text().startswith(f"MODEL={project / 'no-model'}: no vocab")
    out = _run(project, MODEL=str(project / "no-model"), OUT=str(project / "elsewhere"))
    assert out.returncode == 2 and (project / "elsewhere" / "summary.txt").is_file()
    assert not (project / "elsewhere" / "gpu.txt").exists()  # nothing of the GPU's was asked
