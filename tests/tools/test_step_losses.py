"""tools/step_losses.py: the per-step losses of Part 1's step, equal run to run with one seed, and the comparison."""
import json

import pytest

from tools import step_losses
from utils import MinbertError


def test_the_same_seed_gives_the_same_losses_and_the_comparison_reads_them(tmp_path, tiny_model, course_data, capsys):
    common = ["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--steps", "3", "--batch_size", "4"]
    first = step_losses.main(common + ["--out", str(tmp_path / "a.json")])
    again = step_losses.main(common + ["--out", str(tmp_path / "b.json"), "--against", str(tmp_path / "a.json")])
    assert len(first) == 3 and first == again
    assert "largest difference 0.00e+00" in capsys.readouterr().out
    assert json.loads((tmp_path / "a.json").read_text())["losses"] == first
    assert "note:" not in capsys.readouterr().out  # the same settings: nothing to say
    other = step_losses.main(common + ["--out", str(tmp_path / "c.json"), "--seed", "2", "--against",
                                       str(tmp_path / "a.json")])
    c = step_losses.compare(other, first)
    assert c["max_abs"] > 0 and c["mean"] == pytest.approx(sum(other) / 3)
    assert f"note: {tmp_path / 'a.json'} was taken with --seed 1 (this run: 2): its steps are other steps" in \
        capsys.readouterr().out
    import minbert.cli
    import utils
    assert utils.MinbertError is minbert.cli.MinbertError  # this checkout's modules were kept, not imported again


@pytest.mark.parametrize("against, said", [("missing.json", "no such file"), (".", "is a folder"),
                                           ("user.json", "not a record this tool wrote")])
def test_a_bad_against_is_one_line_before_any_step_runs(tmp_path, monkeypatch, against, said):
    (tmp_path / "user.json").write_text('{"my": "notes"}')
    monkeypatch.setattr(step_losses, "step_losses", lambda args: pytest.fail("ran the steps"))
    with pytest.raises(MinbertError, match=f"^--against {tmp_path / against}: {said}"):
        step_losses.main(["--out", str(tmp_path / "o.json"), "--against", str(tmp_path / against)])
    assert not (tmp_path / "o.json").exists()


def test_a_repo_that_is_no_checkout_and_an_out_that_is_the_against_file_are_one_line(tmp_path, monkeypatch):
    """A mistyped --repo had run this checkout's code and recorded the other path; --out at the --against file
    had replaced the reference with the new losses."""
    monkeypatch.setattr(step_losses, "step_losses", lambda args: pytest.fail("ran the steps"))
    (tmp_path / "data").mkdir()
    for repo, said in (("nope", "no such folder"), ("data", "not a checkout of this project")):
        with pytest.raises(MinbertError, match=f"^--repo {tmp_path / repo}: {said}"):
            step_losses.main(["--out", str(tmp_path / "o.json"), "--repo", str(tmp_path / repo)])
    (tmp_path / "ref.json").write_text('{"losses": [1.0]}')
    with pytest.raises(MinbertError, match=r"^--out .*ref.json: is the --against file, which this run reads"):
        step_losses.main(["--out", str(tmp_path / "ref.json"), "--against", str(tmp_path / "ref.json")])
    assert (tmp_path / "ref.json").read_text() == '{"losses": [1.0]}'


def test_the_switches_reach_the_step(tmp_path, tiny_model, course_data):
    """--no_fast_dropout draws torch's masks (other losses than the bulk ones); --no_fused only rounds differently."""
    common = ["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--steps", "3", "--batch_size", "4"]
    bulk = step_losses.main(common + ["--out", str(tmp_path / "a.json")])
    torch_masks = step_losses.main(common + ["--out", str(tmp_path / "b.json"), "--no_fast_dropout"])
    foreach = step_losses.main(common + ["--out", str(tmp_path / "c.json"), "--no_fast_dropout", "--no_fused"])
    assert bulk[0] != torch_masks[0]
    assert foreach == pytest.approx(torch_masks, rel=1e-5)


def test_out_replaces_only_a_record_of_this_tool_and_never_half_writes_it(tmp_path, monkeypatch):
    """A user's JSON that happens to hold "losses" is not this tool's record; an interrupted write keeps the file
    that was there (the next run would refuse half a record as not its own) and leaves no temporary file."""
    mine = tmp_path / "mine.json"
    mine.write_text('{"losses": [0.5, 0.4], "note": "my training curve"}')
    with pytest.raises(MinbertError, match=r"--out .*mine.json: holds a file this tool did not write"):
        step_losses.check_out(mine)
    out = tmp_path / "a.json"
    step_losses.write_out(out, json.dumps({"losses": [1.0], "seed": 1, "steps": 1, "amp": "none"}))
    step_losses.check_out(out)  # its own record: replaced next time


    def interrupted(*a):
        raise KeyboardInterrupt
    monkeypatch.setattr(step_losses.os, "replace", interrupted)  # Ctrl-C once the new record is written
    with pytest.raises(KeyboardInterrupt):
        step_losses.write_out(out, "x" * 100)
    monkeypatch.undo()
    assert json.loads(out.read_text())["losses"] == [1.0] and sorted(p.name for p in tmp_path.iterdir()) == [
        "a.json", "mine.json"]


@pytest.mark.parametrize("flag, value, said", [("--steps", "0", "an integer >= 1"), ("--steps", "-1", "an integer >= 1"),
                                               ("--seed", "-1", "an integer from 0 to 4294967295"),
                                               ("--batch_size", "0", "an integer >= 1"),
                                               ("--max_length", "1", "an integer >= 2")])
def test_a_number_out_of_range_is_one_line(tmp_path, flag, value, said):
    """Each had been a traceback (or, --steps -1, all steps but the last), --steps 0 after writing an empty record."""
    with pytest.raises(MinbertError, match=rf"argument {flag}: {value} must be {said}"):
        step_losses.main(["--out", str(tmp_path / "o.json"), flag, value])
    assert not (tmp_path / "o.json").exists()
