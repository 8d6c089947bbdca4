"""classifier.py: bad input is one clear line that writes nothing; --use_gpu without a GPU and an unknown
--pretrained name are one line each."""
import pytest
import torch

from tests.course import part1_args
from tests.processes import run_main


def cli(*args):
    return run_main("classifier.py", *args)


@pytest.mark.parametrize("break_it, match", [
    (lambda d: (d / "ids-sst-dev.csv").unlink(), r"ids-sst-dev.csv: data file not found"),
    (lambda d: d.joinpath("ids-sst-train.csv").write_text("\tid\tsentence\tsentiment\n0\ta1\t Fine .\t7\n"),
     r"ids-sst-train.csv: line 2: sentiment '7' is outside 0..4"),
    (lambda d: d.joinpath("ids-sst-train.csv").write_text("\tid\tsentence\tsentiment\n0\ta1\t Fine .\t\n"),
     r"ids-sst-train.csv: line 2 \(id a1\): sentiment empty"),
    (lambda d: d.joinpath("ids-sst-dev.csv").write_text("\tid\tsentence\tsentiment\n0\ta1\t Fine .\tx\n"),
     r"ids-sst-dev.csv: line 2: sentiment 'x' is not a number"),
    (lambda d: d.joinpath("ids-sst-train.csv").write_text("\tid\tsentence\tsentiment\n0\ta1\t  \t1\n"),
     r"ids-sst-train.csv: line 2 \(id a1\): sentence empty"),
    (lambda d: d.joinpath("ids-sst-test-student.csv").write_text("\tid\tsentence\tsentiment\n0\ta1\t Hi .\t1\n"),
     r"ids-sst-test-student.csv: line 1: a test file with a label column"),
    (lambda d: d.joinpath("ids-sst-test-student.csv").write_text("\tid\tsentence\n0\ta1\t Hi .\t1\n"),
     r"ids-sst-test-student.csv: line 2: 4 fields but the header has 3"),
])
def test_bad_input_is_one_clear_line_and_writes_nothing(tmp_path, course_data, tiny_model, break_it, match):
    break_it(course_data)
    out = cli(*part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst"))
    assert out.returncode == 2
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in out.stderr
    import re
    assert re.search(match, err[0]), err[0]
    assert not (tmp_path / "pred").exists() or not list((tmp_path / "pred").iterdir())


def test_use_gpu_without_gpu(tmp_path, course_data, tiny_model):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    out = cli(*part1_args(tmp_path, course_data, tiny_model, "--use_gpu"))
    assert out.returncode == 2 and "no GPU is visible" in out.stderr


def test_unknown_pretrained_name(tmp_path, course_data):
    out = cli(*part1_args(tmp_path, course_data, "bert-bsae-uncased"))
    assert out.returncode == 2 and "not a known name" in out.stderr
