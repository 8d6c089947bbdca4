"""flags/settings.py: --amp auto is every script's default and the start says what it picked; --eval_only names
the training flags it ignores; parsing a script's flags loads no benchmark code."""

import torch

import classifier
import multitask_classifier as mt
from minbert import precision
from tests.course import eval_only_args, part1_args, part2_args


def test_auto_is_every_scripts_default_and_says_what_it_picked(tmp_path, course_data, tiny_model, capsys):
    classifier.main(part1_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--datasets", "sst"))
    out = capsys.readouterr().out
    expected = precision.resolve_amp("auto", torch.device("cpu"))[1]
    assert f"precision: {expected}" in out and "(auto:" in out


def test_eval_only_names_the_training_flags_it_ignores(tmp_path, course_data, tiny_model, capsys):
    args = part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "1")
    mt.main(args)
    capsys.readouterr()
    mt.main(eval_only_args(args, tmp_path / "ck" / "mt.pt", tmp_path / "eval"))
    line = [l for l in capsys.readouterr().out.splitlines() if l.startswith("--eval_only re-scores")]
    assert len(line) == 1 and "--lr" in line[0] and "--epochs" in line[0] and "--pretrained" not in line[0]


def test_parsing_a_scripts_flags_loads_no_benchmark():
    """The model shapes bench.py's --config names live in config.py: the flags' module does not import bench/."""
    import subprocess
    import sys
    from tests.course import ROOT
    out = subprocess.run([sys.executable, "-c", "import sys, minbert.flags.settings; "
                          "print(sorted(m for m in sys.modules if m.startswith('minbert.bench')))"],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
