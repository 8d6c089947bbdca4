"""flags/groups.py: the flag groups the scripts share: inference takes only the speed flags that act there, the
earlier --checkpoint PATH names the run folder and the best checkpoint, and the regularisers' defaults follow the
pipeline."""
import pytest

from minbert.flags.defaults import DEFAULT_REGULARIZERS
from minbert.flags.groups import add_regularizer_flags, add_run_flags, add_speed_flags
from utils import MinbertError, Parser


def test_inference_takes_only_the_speed_flags_that_act_there():
    training, inference = Parser(prog="t"), Parser(prog="i")
    add_speed_flags(training)
    add_speed_flags(inference, training=False)
    assert {"bucket", "foreach", "compile", "grad_accum"} <= set(vars(training.parse_args([])))
    assert set(vars(inference.parse_args([]))) == {"amp", "attn", "pad_multiple"}
    with pytest.raises(MinbertError, match="unrecognized arguments: --compile"):
        inference.parse_args(["--compile"])


def test_the_earlier_checkpoint_flag_names_the_run_folder_and_the_best_checkpoint():
    ap = Parser(prog="p")
    add_run_flags(ap, "multitask", "--checkpoint")
    args = ap.parse_args(["--checkpoint", "somewhere/best.pt"])
    assert (args.run_dir, args.checkpoint_name) == ("somewhere", "best")
    assert ap.parse_args([]).checkpoint_name is None


def test_the_regularisers_default_to_the_pipelines_recipe():
    part2, part1 = Parser(prog="2"), Parser(prog="1")
    add_regularizer_flags(part2, DEFAULT_REGULARIZERS["multitask"])
    add_regularizer_flags(part1, DEFAULT_REGULARIZERS["classifier"], full_model_only=True)
    assert part2.parse_args([]).rdrop_weight == 2.0
    assert part1.parse_args([]).rdrop_weight is None  # resolved once the fine-tune mode is known (settings.py)
