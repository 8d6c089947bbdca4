"""tools/layernorm_rate.py: BERT's LayerNorm gains in a group of their own at their factor; a factor that is no
learning-rate factor is one line."""
import pytest

from tests.processes import run_main
from tools import layernorm_rate


def test_layernorm_rate_puts_the_gains_alone_at_their_factor(tiny_model):
    from minbert.training import schedule
    from minbert.specs import ModelSpec
    from minbert.tasks.multitask import MultitaskBERT
    model = MultitaskBERT(ModelSpec(pretrained=str(tiny_model), dropout=[0.1] * 3))
    groups = layernorm_rate.with_layernorm_factor(schedule.param_groups, 10.0)(model, 1e-4, llrd=0.5)
    rate = {id(p): g["lr"] for g in groups for p in g["params"]}
    plain = {id(p): g["lr"] for g in schedule.param_groups(model, 1e-4, llrd=0.5) for p in g["params"]}
    assert rate.keys() == plain.keys() and sum(len(g["params"]) for g in groups) == len(rate)
    for name, p in model.named_parameters():
        gain = "layer_norm" in name and name.endswith(".weight")
        assert rate[id(p)] == pytest.approx(plain[id(p)] * (10.0 if gain else 1.0)), name


@pytest.mark.parametrize("factor, said", [
    *((f, f"FACTOR {f}: a learning-rate factor must be a number > 0") for f in ("-5", "0", "nan", "inf", "1e309")),
    ("abc", "FACTOR 'abc': not a number"),
])
def test_a_factor_no_learning_rate_can_take_is_one_line_before_any_run(factor, said, tmp_path):
    done = run_main("tools/layernorm_rate.py", factor, "--run_dir", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith(f"error: {said}"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and not (tmp_path / "run").exists()


@pytest.mark.parametrize("argv, status", [(["--help"], 0), (["-h"], 0), ([], 2)])
def test_help_prints_the_usage_and_no_factor_is_one_line(argv, status, tmp_path):
    done = run_main("tools/layernorm_rate.py", *argv, cwd=tmp_path)
    assert done.returncode == status and "usage: tools/layernorm_rate.py FACTOR" in done.stdout + done.stderr
    assert len(done.stderr.strip().splitlines()) == (1 if status else 0) and not list(tmp_path.iterdir())


def test_its_run_records_the_factor_and_a_plain_run_differs_from_it(tmp_path, course_data, tiny_model, monkeypatch):
    """The factor had been lost from the run's identity: report.py --compare took a group mixing such runs with
    plain ones for one configuration over seeds, and --resume could not tell them apart."""
    import multitask_classifier as mt
    from minbert.reports.seeds import differences
    from minbert.runs import identity
    from minbert.runs.folders import recorded_flags
    from minbert.training import schedule
    from tests.course import part2_args
    monkeypatch.setattr(identity, "TOOL_SETTINGS", {})  # (the tool sets them for its process: undone here)
    monkeypatch.setattr(schedule, "param_groups", schedule.param_groups)
    monkeypatch.chdir(tmp_path)
    quick = ("--epochs", "1", "--steps_per_epoch", "2")
    layernorm_rate.main(["10", *part2_args(tmp_path / "ln", course_data, tiny_model, *quick)])
    monkeypatch.setattr(identity, "TOOL_SETTINGS", {})
    mt.main(part2_args(tmp_path / "plain", course_data, tiny_model, *quick))
    ln, plain = recorded_flags(tmp_path / "ln" / "ck"), recorded_flags(tmp_path / "plain" / "ck")
    assert ln["layernorm_rate"] == 10.0 and "layernorm_rate" not in plain
    assert differences(plain, ln) == ["--layernorm_rate None against 10.0"]
