"""gpt2/flags.py: the handout's flags and defaults; levers that reach into BERT's modules are refused in one line;
--max_length is held to the model's positions."""
import pytest

from gpt2.flags import classifier_parser, classifier_settings
from utils import MinbertError


def test_defaults_and_refused_levers(tiny_gpt2, course_data):
    base = ["--pretrained", str(tiny_gpt2), "--data_dir", str(course_data)]
    s = classifier_settings(classifier_parser().parse_args(base))
    assert (s.model.fine_tune_mode, s.recipe.lr, s.batch_size, s.model.dropout, s.recipe.epochs) == \
        ("last-linear-layer", 1e-3, 8, (0.3,), 10)
    assert s.model.max_length == 64  # the tiny model's positions, not the handout's 512
    full = classifier_settings(classifier_parser().parse_args(base + ["--fine-tune-mode", "full-model"]))
    assert full.recipe.lr == 1e-5
    for flag in (["--smart_weight", "1"], ["--freeze_layers", "1"], ["--llrd", "0.9"]):
        with pytest.raises(MinbertError, match=rf"{flag[0]} .*: not available for GPT-2"):
            classifier_settings(classifier_parser().parse_args(base + flag))
    with pytest.raises(MinbertError, match="--lora_rank configures LoRA/DoRA adapters, but --fine-tune-mode is full-model"):
        classifier_settings(classifier_parser().parse_args(base + ["--fine-tune-mode", "full-model", "--lora_rank", "4"]))
    with pytest.raises(MinbertError, match="--adapter_dim 8 sizes Houlsby adapters, but --fine-tune-mode is last-linear"):
        classifier_settings(classifier_parser().parse_args(base + ["--adapter_dim", "8"]))
    with pytest.raises(MinbertError, match="--prefix_length 4: prefix tuning is BERT's here"):
        classifier_settings(classifier_parser().parse_args(base + ["--prefix_length", "4"]))
    lora = classifier_settings(classifier_parser().parse_args(base + ["--fine-tune-mode", "lora", "--merge"]))
    assert lora.merge and lora.model.lora_targets == ("query", "value") and lora.recipe.lr == 1e-3
