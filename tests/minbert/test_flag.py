"""flag.py: a Per value differs by script; a row is spelled as it is typed."""
from minbert.flag import Flag, Per, per


def test_a_per_value_differs_by_script_and_a_plain_value_does_not():
    lr = Per(1e-3, multitask=1e-5, gpt2_classifier=2e-5)
    assert per(lr, "multitask") == 1e-5 and per(lr, "gpt2-classifier") == 2e-5 and per(lr, "pretrain") == 1e-3
    assert per(0.5, "multitask") == 0.5


def test_a_row_is_spelled_as_it_is_typed():
    assert Flag("lr", None, "positive_float", "").spelling == "--lr"
    assert Flag("fused", True, "off", "").spelling == "--no_fused"  # a switch that turns something off
    assert Flag("fine_tune_mode", "full-model", ("full-model",), "", name="--fine-tune-mode").spelling == \
        "--fine-tune-mode"
