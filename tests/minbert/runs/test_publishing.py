"""runs/publishing.py: a run's files reach their folders all or nothing, with a record that matches them; an
interruption at any point of publishing leaves either the files before it, or an intent that the next command
carries out."""
import os
import signal
import types

import pytest

from minbert.runs import outputs, publishing
from utils import MinbertError


class Interrupted(BaseException):
    """The process going away at one point of publishing (Ctrl-C, or a kill: the files on disk are the same)."""


def _setting(tmp_path):
    """Two destination folders holding what run 'old' published (one file there is a user's, kept with --backup),
    and run 'new''s files for both."""
    a, b, src = tmp_path / "a", tmp_path / "b", tmp_path / "new-run"
    for folder in (a, b, src):
        folder.mkdir()
    pairs = []
    for folder, names in ((a, ["x.csv", "y.csv", "z.csv"]), (b, ["u.csv", "v.csv"])):
        for n in names:
            (src / n).write_text(f"new {n}\n")
            pairs.append((src / n, folder / n))
            if n != "v.csv":
                (folder / n).write_text(f"old {n}\n")
                publishing.record([folder / n], "old", tmp_path / "old-run")
    (b / "v.csv").write_text("the user's own v\n")
    return pairs


def _state(pairs):
    """'old' or 'new': which run's files every destination holds, each matching the record (or the test fails)."""
    seen = set()
    for _, dest in pairs:
        rec = publishing.written_by(dest)
        if dest.name == "v.csv" and dest.read_text() == "the user's own v\n":
            seen.add("old")
            continue
        assert rec is not None, f"{dest} holds {dest.read_text()!r}, which its folder's record does not match"
        seen.add(rec["run"])
        assert dest.read_text().startswith(rec["run"])
    assert len(seen) == 1, f"a mix of runs' files: {seen}"
    return seen.pop()


def _interrupt_at(monkeypatch, k):
    """Make publishing's k-th step (a file staged, a record written, a rename, the intent removed) never happen:
    the process stops just before it. Returns the list of the steps it took."""
    steps = []

    def step(name, real):
        def wrapped(*a, **kw):
            steps.append(name)
            if len(steps) == k:
                raise Interrupted
            return real(*a, **kw)
        return wrapped
    monkeypatch.setattr(publishing, "write_beside", step("stage", publishing.write_beside))
    monkeypatch.setattr(publishing, "atomic_write", step("record", publishing.atomic_write))
    proxy = types.SimpleNamespace(**{n: getattr(os, n) for n in dir(os) if not n.startswith("__")})
    proxy.replace, proxy.remove = step("rename", os.replace), step("remove intent", os.remove)
    monkeypatch.setattr(publishing, "os", proxy)
    return steps


def test_publishing_interrupted_at_each_step_is_all_or_nothing(tmp_path, monkeypatch):
    """Interrupt publishing before each of its steps in turn: right after, the folders hold the files before it
    (nothing left behind) or an intent; the next command finishes that intent, and then every file is the new
    run's and matches the record; the user's file is kept as a backup, never lost."""
    total = None
    for k in range(1, 100):
        case = tmp_path / str(k)
        case.mkdir()
        pairs = _setting(case)
        folders = sorted({d.parent for _, d in pairs})
        with monkeypatch.context() as m:
            steps = _interrupt_at(m, k)
            try:
                publishing.publish(pairs, "new", case / "new-run", log=lambda *_: None)
                total = len(steps)
            except Interrupted:
                pass
        if total is not None:
            assert _state(pairs) == "new"
            break
        left = sorted(p.name for f in folders for p in f.iterdir() if p.name.endswith(".publish"))
        if not any((f / publishing.INTENT).exists() for f in folders):
            assert _state(pairs) == "old" and left == [], (k, steps)  # stopped while staging: nothing changed
        else:
            lines = []
            publishing.finish_publishing(folders, log=lines.append)  # what the next run's check_outputs calls
            assert _state(pairs) == "new", (k, steps)
            assert lines and all("finished putting run new's files in place" in line or line.startswith("kept files")
                                 for line in lines)
            outputs.check_outputs(files=[d for _, d in pairs])  # and the next run may replace them
        assert not [p for f in folders for p in f.iterdir() if p.name.endswith(".publish")
                    or p.name == publishing.INTENT]
        assert [p.read_text() for p in (case / "b").glob("v.csv.*.bak")] in ([], ["the user's own v\n"])
        if _state(pairs) == "new":
            assert [p.read_text() for p in (case / "b").glob("v.csv.*.bak")] == ["the user's own v\n"]
    assert total is not None and total >= 5 + 2 + 6  # staged files, intents, renames (a backup among them), ...


def test_the_next_run_and_resume_finish_a_publishing_a_kill_cut_short(tmp_path, monkeypatch):
    """The intent is carried out by whichever comes first: check_outputs (a new run, or the run's --resume) or
    publish itself; a line says so."""
    pairs = _setting(tmp_path)
    with monkeypatch.context() as m:
        steps = _interrupt_at(m, 5 + 2 + 3)  # the staged files and intents written, two renames done
        with pytest.raises(Interrupted):
            publishing.publish(pairs, "new", tmp_path / "new-run", log=lambda *_: None)
        assert steps.count("rename") == 3
    lines = []
    publishing.publish(pairs[:1], "new", tmp_path / "new-run", log=lines.append)
    assert lines[0].startswith(f"{tmp_path / 'a'}: finished putting run new's files in place (x.csv, y.csv, z.csv)")
    assert lines[-1].startswith("kept files") is False and _state(pairs[:3]) == "new"
    assert (tmp_path / "b" / publishing.INTENT).exists()  # b's part waits for the next command that writes there
    outputs.check_outputs(files=[d for _, d in pairs], backup=True)
    assert _state(pairs) == "new" and not (tmp_path / "b" / publishing.INTENT).exists()


def test_ctrl_c_during_the_renames_waits_for_them(tmp_path, monkeypatch):
    """A real SIGINT arriving while the files are put in place: publishing completes (files and record), then the
    KeyboardInterrupt is raised."""
    pairs = _setting(tmp_path)
    proxy = types.SimpleNamespace(**{n: getattr(os, n) for n in dir(os) if not n.startswith("__")})
    sent = []

    def replace(a, b):
        if not sent:
            sent.append(1)
            os.kill(os.getpid(), signal.SIGINT)
        return os.replace(a, b)
    proxy.replace = replace
    monkeypatch.setattr(publishing, "os", proxy)
    with pytest.raises(KeyboardInterrupt):
        publishing.publish(pairs, "new", tmp_path / "new-run", log=lambda *_: None)
    assert sent and _state(pairs) == "new"
    assert not [p for f in (tmp_path / "a", tmp_path / "b") for p in f.iterdir()
                if p.name.endswith(".publish") or p.name == publishing.INTENT]


def test_ctrl_c_while_staging_leaves_the_folders_as_they_were(tmp_path, monkeypatch):
    pairs = _setting(tmp_path)
    before = {d: d.read_bytes() for _, d in pairs}
    real, calls = publishing.copier, []

    def copier(src):
        write = real(src)

        def interrupted(fp):
            calls.append(src)
            write(fp)
            if len(calls) == 3:
                os.kill(os.getpid(), signal.SIGINT)  # lands inside the third file's write
        return interrupted
    monkeypatch.setattr(publishing, "copier", copier)
    with pytest.raises(KeyboardInterrupt):
        publishing.publish(pairs, "new", tmp_path / "new-run", log=lambda *_: None)
    assert {d: d.read_bytes() for _, d in pairs} == before and _state(pairs) == "old"
    assert sorted(p.name for p in (tmp_path / "a").iterdir()) == [".sources.json", "x.csv", "y.csv", "z.csv"]


def test_a_record_or_intent_the_project_did_not_write_is_refused(tmp_path):
    """A user's own .sources.json (or .publishing.json) in an output folder would be replaced by the project's
    record: one line, nothing written."""
    folder = tmp_path / "out"
    folder.mkdir()
    (folder / ".sources.json").write_text("my own notes, not JSON\n")
    with pytest.raises(MinbertError, match=r"out/.sources.json: not the record of written files this project keeps"):
        outputs.check_outputs(files=[folder / "sst-dev-output.csv"])
    (folder / ".sources.json").write_text('{"editor": "vim"}')
    with pytest.raises(MinbertError, match=r"not the record of written files"):
        outputs.check_file(folder / "x.json", "--json")
    (folder / ".sources.json").unlink()
    (folder / ".publishing.json").write_text('{"files": [{"name": "../../etc/passwd", "sha256": "0"}]}')
    with pytest.raises(MinbertError, match=r"out/.publishing.json: not a record of publishing this project wrote"):
        outputs.check_outputs(files=[folder / "sst-dev-output.csv"])
    with pytest.raises(MinbertError, match=r"--json .*/.sources.json: the name of the record the project keeps"):
        outputs.check_file(tmp_path / ".sources.json", "--json")
    assert sorted(p.name for p in folder.iterdir()) == [".publishing.json"]


def test_a_temporary_file_never_replaces_a_file_beside_the_output(tmp_path):
    """A user's file named like the temporary one (NAME.tmp) stays as it was."""
    from minbert.files import atomic_write
    (tmp_path / "out.json.tmp").write_text("mine\n")
    atomic_write(tmp_path / "out.json", lambda fp: fp.write(b"{}"))
    assert (tmp_path / "out.json.tmp").read_text() == "mine\n" and (tmp_path / "out.json").read_text() == "{}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "out.json.tmp"]
    assert oct((tmp_path / "out.json").stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


# ----------------------------------------------------------------------------- end to end: Part 2 and Part 1

def _part2(tmp_path, run, data, model, *extra):
    """A two-step Part 2 run in tmp_path/run/ck publishing into tmp_path/pred, shared by every run."""
    from tests.course import part2_args
    args = part2_args(tmp_path / run, data, model, "--epochs", "1", "--steps_per_epoch", "2", *extra)
    return [a.replace(str(tmp_path / run / "pred"), str(tmp_path / "pred")) for a in args]


def _consistent(folder, run_folder):
    """Every leaderboard file in `folder` is the one in `run_folder` and matches the folder's record."""
    files = sorted(folder.glob("*-output.csv"))
    assert len(files) == 6
    for f in files:
        assert f.read_bytes() == (run_folder / f.name).read_bytes(), f
        assert publishing.written_by(f) is not None and publishing.written_by(f)["dir"] == str(run_folder)
    assert not [p for p in folder.iterdir() if p.name.endswith(".publish") or p.name == publishing.INTENT]


def test_part2_killed_while_publishing_resumes_and_the_next_run_goes_on(tmp_path, course_data, tiny_model,
                                                                       monkeypatch, capsys):
    """Run b dies half way through putting its files in predictions/ over run a's: its --resume (even with
    --backup) finishes the job, and a new run c then publishes over it; interrupted while staging, c's --resume
    finds predictions/ as b left them."""
    import multitask_classifier as mt
    mt.main(_part2(tmp_path, "a", course_data, tiny_model, "--seed", "7"))
    with monkeypatch.context() as m:
        steps = _interrupt_at(m, 6 + 1 + 3)  # six files staged, the intent written, two renames done
        with pytest.raises(Interrupted):
            mt.main(_part2(tmp_path, "b", course_data, tiny_model))
        assert steps.count("rename") == 3
    capsys.readouterr()
    mt.main(_part2(tmp_path, "b", course_data, tiny_model, "--resume", "--backup"))
    assert "finished putting run ck's files in place" in capsys.readouterr().out
    _consistent(tmp_path / "pred", tmp_path / "b" / "ck")
    assert not list((tmp_path / "pred").glob("*.bak"))  # nothing of the user's was there to keep
    with monkeypatch.context() as m:
        _interrupt_at(m, 4)  # Ctrl-C while the fourth file is staged
        with pytest.raises(Interrupted):
            mt.main(_part2(tmp_path, "c", course_data, tiny_model, "--seed", "3"))
    _consistent(tmp_path / "pred", tmp_path / "b" / "ck")
    mt.main(_part2(tmp_path, "c", course_data, tiny_model, "--seed", "3", "--resume"))
    _consistent(tmp_path / "pred", tmp_path / "c" / "ck")


def test_part1_killed_while_publishing_resumes(tmp_path, course_data, tiny_model, monkeypatch):
    """classifier.py publishes through the same code (as do pretrain.py, ensemble.py and the GPT-2 scripts)."""
    import classifier
    from tests.course import part1_args
    args = part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst", "--epochs", "1")
    classifier.main(args + ["--seed", "7"])
    before = {p.name: p.read_bytes() for p in (tmp_path / "pred").glob("*.csv")}
    with monkeypatch.context() as m:
        _interrupt_at(m, 2 + 1 + 1)  # the dev and test files staged, the intent written, one rename done
        with pytest.raises(Interrupted):
            classifier.main(part1_args(tmp_path / "b", course_data, tiny_model, "--datasets", "sst", "--epochs", "1",
                                       "--predictions_dir", str(tmp_path / "pred")))
    assert (tmp_path / "pred" / publishing.INTENT).exists()
    classifier.main(part1_args(tmp_path / "b", course_data, tiny_model, "--datasets", "sst", "--epochs", "1",
                               "--predictions_dir", str(tmp_path / "pred"), "--resume"))
    after = {p.name: p.read_bytes() for p in (tmp_path / "pred").glob("*.csv")}
    assert sorted(after) == sorted(before) and after != before
    for name, data in after.items():
        assert data == (tmp_path / "b" / "ck" / name).read_bytes() and publishing.written_by(tmp_path / "pred" / name)


def test_gpt2_killed_while_publishing_resumes(tmp_path, course_data, tiny_gpt2, monkeypatch):
    """Build GPT-2's scripts publish through the same code: paraphrase_detection.py killed among its renames, its
    --resume completes predictions/."""
    from gpt2 import paraphrase_detection
    args = ["--pretrained", str(tiny_gpt2), "--data_dir", str(course_data), "--epochs", "1", "--lr", "1e-3",
            "--run_dir", str(tmp_path / "run"), "--predictions_dir", str(tmp_path / "pred")]
    with monkeypatch.context() as m:
        _interrupt_at(m, 2 + 1 + 1)  # both files staged, the intent written, one rename done
        with pytest.raises(Interrupted):
            paraphrase_detection.main(args)
    assert (tmp_path / "pred" / publishing.INTENT).exists()
    paraphrase_detection.main(args + ["--resume"])
    for split in ("dev", "test"):
        name = f"para-{split}-output.csv"
        assert (tmp_path / "pred" / name).read_bytes() == (tmp_path / "run" / name).read_bytes()
        assert publishing.written_by(tmp_path / "pred" / name)["dir"] == str(tmp_path / "run")
    assert not (tmp_path / "pred" / publishing.INTENT).exists()


def test_protect_and_record_unit(tmp_path):
    a = tmp_path / "a.csv"
    a.write_text("user\n")
    kept = publishing.protect([a, tmp_path / "absent.csv"])
    assert len(kept) == 1 and not a.exists() and kept[0][1].read_text() == "user\n"
    a.write_text("run\n")
    publishing.record([a], "r1", tmp_path)
    assert publishing.written_by(a)["run"] == "r1" and publishing.protect([a]) == []
    a.write_text("changed\n")
    assert publishing.written_by(a) is None and len(publishing.protect([a])) == 1
