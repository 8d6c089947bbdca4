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
