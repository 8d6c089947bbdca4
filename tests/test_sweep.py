"""sweep.py: trials run the pipeline scripts in their own processes; a sweep stopped by Ctrl-C or killed
outright continues where it stopped, evaluating each configuration once; the median pruner stops a trial
after the epoch it rejects; a trial whose flags cannot work together fails alone; bad input is one line."""
import pytest

import sweep
from tests.helpers import sweep_base
from utils import MinbertError


@pytest.mark.parametrize("argv, match", [
    (["--study", "../../x"], r"--study '../../x': names a folder under runs/sweeps/"),
    (["--seeds", "-1"], r"argument --seeds: -1 must be an integer from 0 to 4294967295"),
    (["--sampler", "grid", "--sampler_seed", "3"], r"--sampler_seed seeds TPE's suggestions, which --sampler grid"),
    (["--no_prune", "--prune_startup", "3"], r"--prune_startup tunes the median pruner, which --no_prune turns off"),
])
def test_sweep_flags_are_checked_in_one_line(tmp_path, monkeypatch, course_data, tiny_model, argv, match):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MinbertError, match=match):
        sweep.main(["classifier", "--space", "lr=1e-3", *argv, "--", *sweep_base(course_data, tiny_model)])
    assert not (tmp_path.parent / "x").exists() and not list(tmp_path.glob("runs/sweeps/*/t*"))
