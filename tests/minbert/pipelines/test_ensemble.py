"""pipelines/ensemble.py: an ensemble of two copies is the model; members are checked before any runs; the
average is of probabilities, Quora decided at one half; members of other data are refused."""
import json
import os
import shutil

import numpy as np
import pytest

import classifier
import ensemble
import multitask_classifier as mt
from evaluation import output_name, read_predictions
from minbert.pipelines import ensemble as ensembling
from tests.course import output_files, part1_args, part2_args
from utils import MinbertError


@pytest.fixture
def trained(trained_part2):
    """One trained multitask checkpoint and its six files (trained once per test run: read, never written)."""
    return trained_part2.checkpoint, trained_part2.predictions


def test_ensemble_of_two_copies_reproduces_the_model(tmp_path, course_data, trained, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ckpt, pred = trained
    copy = tmp_path / "copy.pt"
    shutil.copyfile(ckpt, copy)
    scores = ensemble.main([str(ckpt), str(copy), "--data_dir", str(course_data), "--out", str(tmp_path / "ens")])
    assert output_files(tmp_path / "ens") == output_files(pred)
    out = capsys.readouterr().out
    assert "six files in runs/ensemble-" in out and f"predictions copied to {tmp_path / 'ens'}" in out
    # one model twice is said to be: its checkpoint and a copy predict alike on every example
    assert f"note: members {ckpt} and {copy} predict the same on every example of the six files" in out
    # a run's prediction folder beside its own checkpoint: the same, though one is rounded to the files' 4 decimals
    ensemble.main([str(pred), str(ckpt), "--data_dir", str(course_data), "--out", str(tmp_path / "ens2")])
    assert f"note: members {pred} and {ckpt} predict the same" in capsys.readouterr().out
    # folders of prediction files: a vote of two copies is the copy; published over the first ensemble's
    # files, which the line names (they stay in the first ensemble's run folder)
    folder = tmp_path / "copy"
    shutil.copytree(pred, folder)
    again = ensemble.main([str(pred), str(folder), "--data_dir", str(course_data), "--out", str(tmp_path / "ens"),
                           "--run_name", "vote"])
    assert output_files(tmp_path / "runs" / "vote") == output_files(pred)
    assert again == pytest.approx(scores, abs=1e-3)  # files hold STS to 4 decimals
    sources = json.loads((tmp_path / "ens" / ".sources.json").read_text())
    assert {v["run"] for v in sources.values()} == {"vote"}
    # an ensemble's run folder is a folder of prediction files: a member as such (it had been refused as a run
    # folder of another pipeline)
    third = ensemble.main([str(tmp_path / "runs" / "vote"), str(pred), "--data_dir", str(course_data), "--out",
                           str(tmp_path / "ens3")])
    assert third == pytest.approx(scores, abs=1e-3)


def test_ensemble_refuses_a_member_twice_and_a_bad_one_before_running_any(tmp_path, course_data, trained, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ckpt, pred = trained
    with pytest.raises(MinbertError, match="the same member as"):
        ensemble.main([str(pred), str(pred) + "/", "--data_dir", str(course_data)])
    with pytest.raises(MinbertError, match=r"one member; an ensemble averages at least two models"):
        ensemble.main([str(pred), "--data_dir", str(course_data)])
    last = ckpt.with_name(ckpt.stem + "-last.pt")  # a one-epoch run: its best epoch is its last
    with pytest.raises(MinbertError, match=rf"{last.name}: the same weights as .*{ckpt.name} \(run .*, epoch 0: its "
                                           r"best epoch was its last\)"):
        ensemble.main([str(ckpt), str(last), "--data_dir", str(course_data)])
    os.mkfifo(tmp_path / "pipe.pt")  # a member that is no file nor folder: said so before any member runs
    with pytest.raises(MinbertError, match=r"pipe.pt: is a named pipe, not a checkpoint or prediction folder$"):
        ensemble.main([str(pred), str(tmp_path / "pipe.pt"), "--data_dir", str(course_data)])
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    monkeypatch.setattr(ensembling, "checkpoint_member", lambda *a: pytest.fail("a member ran before all were checked"))
    with pytest.raises(MinbertError, match="junk.pt: cannot read checkpoint"):
        ensemble.main([str(ckpt), str(tmp_path / "junk.pt"), "--data_dir", str(course_data)])
    assert not (tmp_path / "runs").exists() and not (tmp_path / "predictions").exists()


def test_ensemble_averages_probabilities(tmp_path):
    a, b = np.array([[2.0, 0, 0, 0, 0]]), np.array([[0.0, 3, 0, 0, 0]])
    mean = (ensembling.as_probabilities("sst", a) + ensembling.as_probabilities("sst", b)) / 2
    assert ensembling.decide("sst", mean)[0] == 1  # class 1 wins on probability, though logits 2 vs 3 tie per-model
    q = (ensembling.as_probabilities("quora", np.array([4.0])) + ensembling.as_probabilities("quora", np.array([-1.0]))) / 2
    assert ensembling.decide("quora", q)[0] == 1


def test_ensemble_refuses_mismatched_members(tmp_path, course_data, trained, tiny_model):
    ckpt, pred = trained
    bad = tmp_path / "bad"
    shutil.copytree(pred, bad)
    lines = (bad / "sts-dev-output.csv").read_text().splitlines()
    (bad / "sts-dev-output.csv").write_text("\n".join(lines[:1] + ["deadbeef , 3.0"] + lines[2:]) + "\n")
    with pytest.raises(MinbertError, match=r"sts-dev-output.csv: its ids are not those of sts dev: id deadbeef"):
        ensemble.main([str(ckpt), str(bad), "--data_dir", str(course_data), "--out", str(tmp_path / "e")])
    classifier.main(part1_args(tmp_path / "cls", course_data, tiny_model, "--epochs", "1", "--datasets", "cfimdb"))
    with pytest.raises(MinbertError, match="not a multitask_classifier.py checkpoint \\(it was written by classifier.py\\)"):
        ensemble.main([str(ckpt), str(tmp_path / "cls" / "ck" / "last-linear-layer-cfimdb.pt"), "--data_dir",
                       str(course_data), "--out", str(tmp_path / "e")])
    assert not (tmp_path / "e").exists()  # refused before anything was written


def test_an_ensemble_of_differing_members_writes_their_average(tmp_path, course_data, tiny_model, monkeypatch, capsys):
    """Two members trained from other seeds: the files hold the mean of their SST probabilities (argmax), of
    their P(paraphrase) (> 0.5) and of their STS scores; a vote of their prediction folders averages one-hot
    labels, so a two-member disagreement goes to the lower SST class and to "not a paraphrase"."""
    monkeypatch.chdir(tmp_path)
    members = []
    for seed in ("1", "2"):
        mt.main(part2_args(tmp_path / seed, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "3",
                           "--seed", seed, "--lr", "3e-3"))
        members.append(tmp_path / seed)
    seen, real = [], ensembling.checkpoint_member
    monkeypatch.setattr(ensembling, "checkpoint_member", lambda *a: seen.append(real(*a)) or seen[-1])
    ensemble.main([str(m / "ck" / "mt.pt") for m in members] + ["--data_dir", str(course_data), "--out",
                                                                   str(tmp_path / "ens")])
    a, b = seen[0][0], seen[1][0]
    assert not np.allclose(a["sts", "dev"], b["sts", "dev"])  # the members differ
    assert "predict the same" not in capsys.readouterr().out
    written = {k: read_predictions(tmp_path / "ens" / output_name(*k))[0] for k in a}
    for (task, split), values in written.items():
        mean = (a[task, split] + b[task, split]) / 2
        got = np.array([float(v) for v in values.values()])
        if task == "sst":
            assert (got == mean.argmax(-1)).all()
        elif task == "quora":
            assert (got == (mean > 0.5)).all()
        else:
            np.testing.assert_allclose(got, mean, atol=5e-5)  # the file holds 4 decimals
    # a vote of prediction folders: the first member's files, and a copy of them changed on each file's first row
    other = tmp_path / "other"
    shutil.copytree(members[0] / "pred", other)
    for task, split in a:
        path = other / output_name(task, split)
        lines = path.read_text().splitlines()
        i, value = lines[1].split(" , ")
        changed = (round(float(value) + 1.0, 4) if task == "sts"
                   else (int(value) + 2) % 5 if task == "sst" else 1 - int(value))
        path.write_text("\n".join([lines[0], f"{i} , {changed}"] + lines[2:]) + "\n")
    capsys.readouterr()
    ensemble.main([str(members[0] / "pred"), str(other), "--data_dir", str(course_data), "--out", str(tmp_path / "vote"),
                   "--run_name", "vote"])
    assert ("2 test rows tie between the 2 members' votes; a tie goes to the lower SST class and to 'not a "
            "paraphrase'") in capsys.readouterr().out  # the changed first rows of SST and Quora test
    for task, split in a:
        one, two, vote = (read_predictions(d / output_name(task, split))[0]
                          for d in (members[0] / "pred", other, tmp_path / "vote"))
        x, y, v = (np.array([float(p) for p in f.values()]) for f in (one, two, vote))
        assert x[0] != y[0]
        expected = (x + y) / 2 if task == "sts" else np.minimum(x, y)  # a tie: the lower class, not a paraphrase
        np.testing.assert_allclose(v, expected, atol=5e-5)
    # run folders stand for their checkpoints (their models' probabilities average), not for their files
    ensemble.main([str(m / "ck") for m in members] + ["--data_dir", str(course_data), "--out", str(tmp_path / "folders"),
                                                      "--run_name", "folders"])
    out = capsys.readouterr().out
    assert f"member {members[0] / 'ck'}: a run folder; its checkpoint {members[0] / 'ck' / 'mt.pt'} is used" in out
    assert output_files(tmp_path / "folders") == output_files(tmp_path / "ens")


def test_the_averaged_quora_probability_decides_at_one_half():
    mean = np.array([0.2, 0.49, 0.51, 0.58, 0.9])
    assert ensembling.decide("quora", mean).tolist() == [0, 0, 1, 1, 1]
    assert ensembling.decide("sst", np.array([[0.1, 0.5, 0.4], [0.6, 0.3, 0.1]])).tolist() == [1, 0]


def test_a_run_folder_stands_for_its_checkpoint_and_a_part1_folder_is_named(tmp_path, course_data, tiny_model,
                                                                              trained, monkeypatch, capsys):
    """A Part 2 run's folder is its best checkpoint; a Part 1 run's folder is refused in one line before anything
    runs, saying what it is, not asked for a checkpoint that is then refused too."""
    monkeypatch.chdir(tmp_path)
    ckpt, _ = trained
    classifier.main(part1_args(tmp_path / "p1", course_data, tiny_model, "--epochs", "1", "--datasets", "sst"))
    with pytest.raises(MinbertError, match=r"^ensemble.py .*p1/ck: the folder of a classifier.py run; ensemble.py "
                                           r"takes a multitask_classifier.py run's checkpoint or folder$"):
        ensemble.main([str(ckpt.parent), str(tmp_path / "p1" / "ck"), "--data_dir", str(course_data)])
    assert not (tmp_path / "runs").exists()
    shutil.copytree(ckpt.parent, tmp_path / "p2")
    ensemble.main([str(ckpt), str(tmp_path / "p2"), "--data_dir", str(course_data), "--out", str(tmp_path / "e")])
    assert f"member {tmp_path / 'p2'}: a run folder; its checkpoint {tmp_path / 'p2' / 'mt.pt'} is used" in \
        capsys.readouterr().out


@pytest.mark.parametrize("named", [False, True])
def test_ctrl_c_while_the_ensemble_writes_says_where_its_files_are_and_how_to_run_again(tmp_path, course_data,
                                                                                        trained, monkeypatch, named):
    """Stopped after its first file: the line names the partial run folder, says nothing reached --out, and gives
    the command that works: the same one (a new timestamped folder), or another --run_name when one was typed
    (the same name would be refused as already holding a run)."""
    from tests.processes import run_main
    _, pred = trained
    shutil.copytree(pred, tmp_path / "copy")
    written, real = [], ensembling.write_predictions

    def stop_after_one(*a):
        if written:
            raise KeyboardInterrupt
        written.append(real(*a))
        return written[-1]
    monkeypatch.setattr(ensembling, "write_predictions", stop_after_one)
    argv = [str(pred), str(tmp_path / "copy"), "--data_dir", str(course_data), "--out", str(tmp_path / "ens"),
            *(["--run_name", "e"] if named else [])]
    done = run_main("ensemble.py", *argv, cwd=tmp_path)
    assert done.returncode == 130 and "Traceback" not in done.stderr
    line = done.stderr.strip().splitlines()[-1]
    folder = written[0].parent
    assert line.startswith(f"interrupted: the ensemble's files written so far are in {folder}/ and nothing was "
                           f"copied to {tmp_path / 'ens'}/: ")
    assert not (tmp_path / "ens").exists()
    monkeypatch.setattr(ensembling, "write_predictions", real)
    if named:
        assert line.endswith(f"run the command again with another --run_name, or after deleting {folder}")
        assert run_main("ensemble.py", *argv, cwd=tmp_path).returncode == 2  # the same name: refused
    else:
        assert line.endswith("run the same command again (it makes a new run folder)")
        assert run_main("ensemble.py", *argv, cwd=tmp_path).returncode == 0
        assert output_files(tmp_path / "ens") == output_files(pred)


def test_a_member_whose_run_is_still_training_is_said_to_be(tmp_path, course_data, trained, capsys, monkeypatch):
    """Legal (its best checkpoint so far is a model), but the run may replace the file: one note names it."""
    from minbert.runs.lock import RunLock
    monkeypatch.chdir(tmp_path)  # (the ensembles' run folders go under runs/ here)
    ckpt, pred = trained
    (tmp_path / "live").mkdir()
    live = tmp_path / "live" / ckpt.name
    shutil.copyfile(ckpt, live)
    lock = RunLock(live.parent).acquire("--run_dir", "multitask").claim()
    try:
        ensemble.main([str(live), str(pred), "--data_dir", str(course_data), "--out", str(tmp_path / "ens")])
    finally:
        lock.release()
    assert (f"note: member {live}: its run is still training (process {os.getpid()} since "
            in capsys.readouterr().out)
    ensemble.main([str(live), str(pred), "--data_dir", str(course_data), "--out", str(tmp_path / "ens2")])
    assert "still training" not in capsys.readouterr().out  # its process gone: nothing to say
