"""optimizer_test.py: the handout's test passes on our AdamW and fails on the usual mistakes it can see, against
the course's optimizer_test.npy where --fetch put it (said in one line) and the project's own otherwise."""

import numpy as np
import pytest
import torch

import optimizer_test
from minbert import course_files
from minbert.files import git_blob_id
from optimizer import AdamW
from tests import test_optimizer as adamw_tests
from tests.course import ROOT, real_data_folder
from tests.processes import run_main
from utils import MinbertError


def test_handout_optimizer_test_script_passes():
    out = run_main("optimizer_test.py")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Optimizer test passed!" in out.stdout


class _Variant(AdamW):
    """AdamW with one mistake, `mistake(group, p)` applied to every parameter before the (decay-free) step."""
    mistake = None

    def step(self, closure=None):
        saved = [g["weight_decay"] for g in self.param_groups]
        with torch.no_grad():
            for g in self.param_groups:
                for p in g["params"]:
                    if p.grad is not None:
                        type(self).mistake(g, p)
                g["weight_decay"] = 0.0
        try:
            return super().step(closure)
        finally:
            for g, w in zip(self.param_groups, saved):
                g["weight_decay"] = w


class DecayBeforeStep(_Variant):
    mistake = staticmethod(lambda g, p: p.mul_(1 - g["lr"] * g["weight_decay"]))


class DecayInTheGradient(_Variant):  # Adam with L2, not AdamW: the decay goes through the moments
    mistake = staticmethod(lambda g, p: p.grad.add_(p, alpha=g["weight_decay"]))


class NoDecay(_Variant):
    mistake = staticmethod(lambda g, p: None)


class NoCorrection(AdamW):
    def __init__(self, params, correct_bias, **kw):
        super().__init__(params, correct_bias=False, **kw)


def _course_file():
    path = real_data_folder() / "optimizer_test.npy"
    if not path.exists():
        pytest.skip("the course's optimizer_test.npy is not in data/ (python datasets.py --fetch)")
    assert git_blob_id(path) == course_files.REFERENCE_BLOB_IDS["optimizer_test.npy"]
    return path


@pytest.mark.parametrize("reference", ["ours", "course"])
def test_a_wrong_optimizer_fails_the_handout_test(reference):
    """The handout's reference catches a missing bias correction, weight decay coupled into the gradient, and
    no weight decay. It cannot see decay applied before the step instead of after it: at its lr 1e-3 and
    weight decay 1e-4 the two orders differ by about 1e-10 per step; test_optimizer.py's
    test_matches_algorithm_1_by_hand (weight decay 0.5) catches that one. The same on the project's own
    reference and on the course's (where setup.sh fetched it)."""
    test_optimizer = optimizer_test.test_optimizer
    ref = optimizer_test.read_reference(ROOT / "optimizer_test.npy" if reference == "ours" else _course_file())
    assert np.allclose(ref, test_optimizer(AdamW, foreach=False).numpy(), atol=1e-6, rtol=1e-4)
    for wrong in (NoCorrection, DecayInTheGradient, NoDecay):
        assert not np.allclose(ref, test_optimizer(wrong).numpy(), atol=1e-6, rtol=1e-4), wrong.__name__
    assert np.allclose(ref, test_optimizer(DecayBeforeStep).numpy(), atol=1e-6, rtol=1e-4)  # blind to the order
    with pytest.raises(AssertionError):
        adamw_tests.test_matches_algorithm_1_by_hand({}, DecayBeforeStep)


def test_help_prints_what_the_script_does_and_runs_nothing():
    """--help (and an unknown flag) exit before the test runs: no line of its outcome."""
    out = run_main("optimizer_test.py", "--help")
    assert out.returncode == 0 and "usage: optimizer_test.py" in out.stdout and "1000 AdamW steps" in out.stdout
    assert "Optimizer test" not in out.stdout + out.stderr
    out = run_main("optimizer_test.py", "--x")
    assert out.returncode == 2 and out.stderr.strip() == "error: optimizer_test.py: unrecognized arguments: --x"


def test_the_course_reference_is_used_when_present_and_said(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(optimizer_test, "DATA", tmp_path)
    course = tmp_path / "optimizer_test.npy"
    np.save(course, np.zeros((2, 3), dtype=np.float32))  # a reference no AdamW meets: used, so the test fails
    monkeypatch.setitem(course_files.REFERENCE_BLOB_IDS, "optimizer_test.npy", git_blob_id(course))
    with pytest.raises(SystemExit, match="Optimizer test failed"):
        optimizer_test.main([])
    assert capsys.readouterr().out == f"reference: the course's optimizer_test.npy, {course} (git blob " \
                                      f"{git_blob_id(course)[:10]})\n"
    np.save(course, np.load(ROOT / "optimizer_test.npy"))
    monkeypatch.setitem(course_files.REFERENCE_BLOB_IDS, "optimizer_test.npy", git_blob_id(course))
    optimizer_test.main([])
    assert capsys.readouterr().out.endswith("Optimizer test passed!\n")
    course.unlink()
    optimizer_test.main([])
    assert capsys.readouterr().out.startswith(
        f"reference: the project's own optimizer_test.npy (the course's optimizer_test.npy is not in "
        f"{tmp_path}: python datasets.py --fetch puts it there)\n")


def test_our_adamw_passes_the_courses_own_reference():
    ref = optimizer_test.read_reference(_course_file())
    for kernel in ({"foreach": False}, {"fused": False}, {}, {"capturable": True}):
        assert np.allclose(ref, optimizer_test.test_optimizer(AdamW, **kernel).numpy(), atol=1e-6, rtol=1e-4)


def test_a_damaged_reference_is_one_line(tmp_path):
    bad = tmp_path / "optimizer_test.npy"
    bad.write_bytes(b"not numpy")
    with pytest.raises(MinbertError, match=r"optimizer_test.npy: cannot read the reference weights \(damaged, or not "
                                           r"a NumPy .npy file\); move it away: the project's own reference is then "
                                           r"used, and python datasets.py --fetch puts the course's there"):
        optimizer_test.read_reference(bad)  # (--fetch alone never replaces a file that differs)
    bad.write_text("hello, a text file\n")  # numpy would advise loading it with allow_pickle (running code)
    with pytest.raises(MinbertError, match=r"\(damaged, or not a NumPy .npy file\)") as e:
        optimizer_test.read_reference(bad)
    assert "allow_pickle" not in str(e.value)
    np.save(bad, np.array([{"a": 1}], dtype=object))
    with pytest.raises(MinbertError, match=r"cannot read the reference weights \(it holds Python objects, which are "
                                           r"never loaded\)") as e:
        optimizer_test.read_reference(bad)
    assert "allow_pickle" not in str(e.value)
    np.save(bad, np.zeros(3))
    with pytest.raises(MinbertError, match=r"not the optimizer test's reference \(a \[2, 3\] array"):
        optimizer_test.read_reference(bad)
