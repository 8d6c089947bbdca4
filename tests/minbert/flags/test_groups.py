"""flags/groups.py: the flag groups the scripts share: inference takes only the speed flags that act there, the
earlier --checkpoint PATH names the run folder and the best checkpoint, the folder given twice is refused, and the regularisers' defaults follow the
pipeline."""
from pathlib import Path

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


@pytest.mark.parametrize("argv, given", [
    (["--run_name", "a", "--run_dir", "b"], "--run_name a"), (["--run_dir", "b", "--run_name", "a"], "b"),
    (["--checkpoint_dir", "c", "--run_dir", "b"], "c"), (["--run_dir", "b", "--checkpoint_dir", "c"], "b"),
    (["--checkpoint_dir", "c", "--run_name", "a"], "c"), (["--checkpoint", "c/mt.pt", "--run_name", "a"], "c"),
    (["--run_dir", "b", "--checkpoint", "c/mt.pt"], "b"), (["--run_dir", "b", "--run_dir", "c"], "b"),
    (["--checkpoint", "c/a.pt", "--checkpoint", "c/b.pt"], "c"), (["--run_name", "a", "--run_name", "b"], "--run_name a"),
])
def test_the_run_folder_given_twice_is_refused(argv, given):
    """--run_name, --run_dir and their earlier spellings name one folder: argparse would keep one without a word."""
    import ensemble
    ap = Parser(prog="p")
    add_run_flags(ap, "classifier", "--checkpoint" if "--checkpoint" in argv else "--checkpoint_dir")
    flag = [a for a in argv if a.startswith("--")][1]
    with pytest.raises(MinbertError, match=rf"p: argument {flag}: the run's folder is given already \({given}\): "
                                           rf"--run_name, --run_dir and --checkpoint(_dir)? each name it; give one"):
        ap.parse_args(argv)
    if "--checkpoint_dir" not in argv and "--checkpoint" not in argv:  # the scripts refuse it as the parser does
        import classifier
        with pytest.raises(MinbertError, match=rf"classifier.py: argument {flag}: the run's folder is given already"):
            classifier.get_args(argv)
        with pytest.raises(MinbertError, match=rf"ensemble.py: argument {flag}: the run's folder is given already "
                                               rf"\({given}\): --run_name and --run_dir each name it; give one"):
            ensemble.main(["m1", *argv])


@pytest.mark.parametrize("argv, folder", [
    (["--checkpoint", "ck/mt.pt", "--resume", "--run_dir", "ck"], ("", "ck", "mt")),  # the printed resume command
    (["--run_dir", "ck/", "--checkpoint", "ck/mt.pt"], ("", "ck", "mt")), (["--run_name", "r", "--run_name", "r"],
                                                                           ("r", None, None)),
])
def test_the_same_run_folder_twice_is_taken(argv, folder):
    ap = Parser(prog="p")
    add_run_flags(ap, "multitask", "--checkpoint")
    args = ap.parse_args(argv)
    assert (args.run_name, args.run_dir and str(Path(args.run_dir)), args.checkpoint_name) == folder


def test_the_regularisers_default_to_the_pipelines_recipe():
    part2, part1 = Parser(prog="2"), Parser(prog="1")
    add_regularizer_flags(part2, DEFAULT_REGULARIZERS["multitask"])
    add_regularizer_flags(part1, DEFAULT_REGULARIZERS["classifier"], full_model_only=True)
    assert part2.parse_args([]).rdrop_weight == 2.0
    assert part1.parse_args([]).rdrop_weight is None  # resolved once the fine-tune mode is known (settings.py)
