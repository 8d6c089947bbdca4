"""tools/grad_norms.py: the loss and encoder gradient norm of each task (none for a task of weight 0)."""
import multitask_classifier as mt
from minbert.flags.settings import multitask_settings
from tests.course import part2_args
from tools import grad_norms


def test_grad_norms_tool_measures_each_task(tmp_path, course_data, tiny_model, capsys):
    argv = part2_args(tmp_path, course_data, tiny_model, "--pair_encoding", "siamese", "--loss_weights", "1", "1", "0")
    norms = grad_norms.grad_norms(multitask_settings(mt.get_args(argv), log=lambda *_: None), batches=2)
    assert set(norms) == {"sst", "quora", "sts"}
    assert norms["sst"][1] > 0 and norms["quora"][1] > 0 and norms["sts"] == (0.0, 0.0)  # weight 0: no pull
    grad_norms.main(["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--batch_size", "8",
                     "--sts_loss", "cosent"])
    assert capsys.readouterr().out.count("encoder gradient norm") == 3


def test_a_flag_that_changes_nothing_here_is_refused(tiny_model):
    """--eval_only CKPT had measured the starting weights without a word, --run_name made no run, --sst_dev_out
    wrote nothing: each is one line naming it (the model's and the losses' flags are taken, above)."""
    import pytest
    from utils import MinbertError
    for extra, named in ((["--eval_only", "x.pt"], "--eval_only changes"), (["--epochs", "3", "--lr", "1e-3"],
                                                                            "--epochs, --lr change"),
                         (["--sst_dev_out", "x.csv"], "--sst_dev_out changes")):
        with pytest.raises(MinbertError, match=rf"^tools/grad_norms.py: {named} nothing here: it measures a few "):
            grad_norms.main(["--pretrained", str(tiny_model), *extra])


def test_its_usage_and_errors_name_the_tool_not_the_script_whose_flags_it_takes(capsys):
    import pytest
    from utils import MinbertError
    with pytest.raises(MinbertError, match=r"^tools/grad_norms.py: argument --epochs: 0 must be an integer from 1 to 10,000"):
        grad_norms.main(["--epochs", "0"])
    with pytest.raises(SystemExit):
        grad_norms.main(["--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: tools/grad_norms.py") and "How hard each Part 2 task pulls" in out
