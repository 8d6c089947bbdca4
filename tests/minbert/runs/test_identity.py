"""runs/identity.py: messages name a --no_ switch as typed; a run resumes with its data moved (same bytes) and is
refused with other data."""
import pytest

import multitask_classifier as mt
from minbert.runs.identity import check_same_run
from tests.course import part2_args
from tests.processes import interrupt_second_epoch
from utils import MinbertError


def test_a_no_switch_is_named_as_typed():
    """--no_foreach and --no_bucket store foreach and bucket: messages name the switch the user typed."""
    with pytest.raises(MinbertError, match="^--no_foreach switches off AdamW's multi-tensor kernels"):
        mt.get_args(["--optimizer", "lion", "--no_foreach"])
    with pytest.raises(MinbertError, match="--no_bucket given in the checkpoint's run, not given now"):
        check_same_run({"bucket": False}, {"bucket": True}, "ck.pt")


def test_flags_the_resuming_command_does_not_take_are_not_asked_for():
    """A checkpoint recording flags this script has not (BERT's SMART flags in a GPT-2 run of an earlier minbert):
    one line saying so, not "--smart_weight 0.0 in the checkpoint, None given", which no GPT-2 command can give."""
    with pytest.raises(MinbertError) as e:
        check_same_run({"lr": 1e-3, "smart_weight": 0.0, "smart_step": 1e-3}, {"lr": 1e-3}, "para-last.pt")
    assert "None given" not in str(e.value) and "smart" in str(e.value)
    assert str(e.value).endswith("the checkpoint's run was started by a command with flags this one does not take "
                                 "(--smart_step, --smart_weight): another script's, or an earlier minbert's")


def test_resuming_with_the_data_moved_elsewhere_works_and_other_data_is_refused(tmp_path, course_data, tiny_model,
                                                                               monkeypatch, capsys):
    """The run records its inputs' sha256: the same bytes in another folder resume (one line says so); a file
    with other contents is refused, naming it."""
    import shutil
    common = ["--epochs", "2", "--steps_per_epoch", "2"]
    restore = interrupt_second_epoch(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        mt.main(part2_args(tmp_path, course_data, tiny_model, *common))
    restore()
    moved = tmp_path / "moved"
    shutil.copytree(course_data, moved)
    shutil.rmtree(course_data)
    (moved / "sts-train.csv").write_bytes((moved / "sts-train.csv").read_bytes() + b"\n")  # one more blank line
    with pytest.raises(MinbertError, match=r"cannot resume.*the --sts_train file .*moved/sts-train.csv holds other "
                                           r"contents than .*data/sts-train.csv"):
        mt.main(part2_args(tmp_path, moved, tiny_model, *common, "--resume"))
    (moved / "sts-train.csv").write_bytes((moved / "sts-train.csv").read_bytes()[:-1])
    capsys.readouterr()
    mt.main(part2_args(tmp_path, moved, tiny_model, *common, "--resume"))
    out = capsys.readouterr().out
    assert "resuming with input files that moved, their contents unchanged" in out and "resumed mt from" in out
