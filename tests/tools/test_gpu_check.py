"""tools/gpu_check.sh's arguments, in a copy of it in a folder of its own (it writes under the project folder it
sits in): --help prints what it runs, its settings and where it writes, and writes nothing; an argument it does not
take is one line, exit 2, and writes nothing, as is a setting that cannot be; with good settings it goes on (here
with a budget too small for any stage, which needs no GPU)."""
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


@pytest.mark.parametrize("env, said", [
    ({"MODEL": "no-model"}, "MODEL=no-model: no vocab.txt there"),
    ({"OUT": " "}, "OUT=' ': empty or blank"),
    ({"OUT": ""}, "OUT='': empty or blank"),
    ({"BUDGET": "abc"}, "BUDGET=abc: not a whole number of seconds above 0"),
    ({"BUDGET": "0"}, "BUDGET=0: not a whole number of seconds above 0"),
    ({"STAGES": "tests bogus"}, "STAGES: bogus is not a stage; choose from: tests bench-minilm"),
    ({"STAGES": " "}, "STAGES=' ': no stage"),
    ({"OUT": "file"}, "OUT=file: is a file, not a folder"),
    # each stage once; OUT never among the project's code, docs or data, nor a folder of the user's files (a
    # stage named twice had run twice, data/ had been written into, a user's tests.log replaced)
    ({"STAGES": "tests tests"}, "STAGES: tests is named twice; each stage runs once"),
    ({"OUT": "tools/out"}, "OUT=tools/out: among the project's own code, docs or data"),
    ({"OUT": "model"}, "OUT=model: holds files this script did not write; give a new or empty folder"),
])
def test_a_setting_that_cannot_be_is_one_line_and_writes_nothing(project, env, said):
    (project / "model").mkdir()
    (project / "model" / "vocab.txt").write_text("[PAD]\n")
    (project / "file").write_text("mine")
    before = snapshot(project)
    out = _run(project, **{"MODEL": "model", **env})
    assert out.returncode == 2 and out.stdout == "" and out.stderr.count("\n") == 1
    assert out.stderr.startswith(f"tools/gpu_check.sh: {said}"), out.stderr
    assert snapshot(project) == before and sorted(p.name for p in project.iterdir()) == ["file", "model", "tools"]


def test_with_settings_that_can_be_it_runs_writing_under_out(project):
    """No argument and good settings: the run starts, writing under $OUT (by default gpu-check/ in the project
    folder); with a budget of 1 s every stage is skipped, so no GPU is needed."""
    (project / "model").mkdir()
    (project / "model" / "vocab.txt").write_text("[PAD]\n")
    out = _run(project, MODEL="model", BUDGET="1", STAGES="tests part2")
    assert out.returncode == 0, out.stderr
    assert (project / "gpu-check" / "summary.txt").read_text().splitlines() == [
        "tests skipped (budget spent)", "part2-recorded skipped (budget spent)", "part2-eager skipped (budget spent)"]
    out = _run(project, MODEL="model", BUDGET="1", STAGES="tests", OUT=str(project / "elsewhere"))
    assert out.returncode == 0 and (project / "elsewhere" / "summary.txt").is_file()
