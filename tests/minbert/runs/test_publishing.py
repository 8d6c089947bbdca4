"""runs/publishing.py: a run's files reach their folders in one ordered pass whose record says what is pending; a
process killed at any step of it, then the hidden files it leaves deleted or edited by hand, leaves either one run's
set (put back from its run folder by the next command) or a mix that prepare_submit.py names and refuses; nothing
of the user's is lost and no hidden file stays behind."""
import json
import os
import shutil
import signal
import types
import zipfile

import pytest

import prepare_submit
from minbert import cli
from minbert.runs import outputs, publishing, sources
from tests.course import snapshot, two_runs_published
from utils import MinbertError

P2 = prepare_submit.PART2


class Interrupted(BaseException):
    """An error at one point of publishing (a failed write): the process goes on to its one-line message."""


def _steps(patch, on_step):
    """Patch publishing's steps (a file staged, a record written or a file copied back, a rename) through `patch`
    (monkeypatch.setattr, or setattr in a child process) so that on_step(name) runs before each; returns the list
    of the steps taken."""
    steps = []

    def step(name, real):
        def wrapped(*a, **kw):
            steps.append(name)
            on_step(len(steps))
            return real(*a, **kw)
        return wrapped
    patch(publishing, "write_beside", step("stage", publishing.write_beside))
    patch(sources, "atomic_write", step("record", sources.atomic_write))
    patch(publishing, "atomic_write", step("record", publishing.atomic_write))  # a file copied back
    proxy = types.SimpleNamespace(**{n: getattr(os, n) for n in dir(os) if not n.startswith("__")})
    proxy.replace = step("rename", os.replace)
    patch(publishing, "os", proxy)
    return steps


def _interrupt_at(monkeypatch, k):
    """Make publishing's k-th step fail (Interrupted raised just before it)."""
    def fail(n):
        if n == k:
            raise Interrupted
    return _steps(monkeypatch.setattr, fail)


def _killed_at(k, publish, sig=signal.SIGKILL):
    """Run publish() in a child process sent `sig` just before publishing's k-th step (SIGKILL: nothing cleaned
    up, as `kill -9` or a machine going away). Returns True when the signal ended it, False when it finished."""
    if not hasattr(os, "fork"):
        pytest.skip("needs fork")
    pid = os.fork()
    if pid == 0:  # the child: publish, signalled at step k
        try:
            _steps(setattr, lambda n: n == k and os.kill(os.getpid(), sig))
            publish()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WIFSIGNALED(status) and os.WTERMSIG(status) == sig


# ----------------------------------------------------------------------------- a project with two finished runs

def _holder(root, data, name):
    """Which run folders hold `data` under `name`."""
    return {r for r in ("a", "b") if (root / "runs" / r / name).read_bytes() == data}


def _one_run(root, read):
    """The run whose six files `read(name)` returns, or None for a mix."""
    common = set.intersection(*(_holder(root, read(n), n) for n in P2))
    return sorted(common)[0] if common else None


def _hidden(root):
    return sorted(p.name for p in (root / "predictions").iterdir() if p.name.startswith(".") and
                  p.name != sources.SOURCES)


def _tampered(root, how):
    """What a student does to the hidden files a kill left: nothing, delete them, or edit the record."""
    pred, record = root / "predictions", root / "predictions" / sources.SOURCES
    if how == "delete the temporary files":
        for p in pred.iterdir():
            if p.name.startswith(".") and p.name != sources.SOURCES:
                p.unlink()
    elif how == "delete the record":
        record.unlink(missing_ok=True)
    elif record.exists() and how != "nothing":
        entries = json.loads(record.read_text())
        name = sorted(entries)[0]
        if how == "garble the record":
            record.write_text("{ edited by hand")
            return
        if how == "point an entry at another run":
            entries[name]["dir"] = str(root / "runs" / ("a" if entries[name]["dir"].endswith("b") else "b"))
        elif how == "point an entry at a note":
            entries[name].update(dir=str(pred), file="mynotes.txt")
        elif how == "name the record in an entry":
            entries[sources.SOURCES] = entries.pop(name)
        elif how == "change an entry's sha256":
            entries[name]["sha256"] = "0" * 64
        record.write_text(json.dumps(entries))


TAMPERING = ["nothing", "delete the temporary files", "delete the record", "garble the record",
             "point an entry at another run", "point an entry at a note", "name the record in an entry",
             "change an entry's sha256"]


def _submit(root, **kw):
    """prepare_submit.py --part 2 in `root`: (the run the zip holds, None) or (None, the one-line refusal)."""
    try:
        out = prepare_submit.build(root, part="2", **kw)
    except MinbertError as e:
        return None, str(e)
    z = zipfile.ZipFile(out)
    run = _one_run(root, lambda n: z.read(f"predictions/{n}"))
    assert run is not None, "a zip of two runs' files"
    return run, None


def test_a_kill_at_each_step_then_hidden_files_deleted_or_edited_then_prepare_submit(tmp_path, capsys):
    """Kill run b's publishing before each of its steps; delete or edit by hand what it leaves; then
    prepare_submit.py: it zips one run's six files (put back from the run folder where the record allows), or
    refuses in one line naming the mix (and, for a garbled record, that file), with the command that fixes it,
    which then works. Nothing of the user's is lost, no hidden file stays behind, the run folders are untouched."""
    base = tmp_path / "base"
    pairs = two_runs_published(base)
    snapshot = {p.relative_to(base): p.read_bytes() for p in (base / "runs").rglob("*") if p.is_file()}
    outcomes = set()
    for k in range(1, 40):
        # one kill at step k, its aftermath kept; each tampering starts from a copy of it at the same path (the
        # record names run folders by their absolute paths)
        root, kept = tmp_path / "project", tmp_path / f"killed-{k}"
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(base, root)
        moved = [(root / s.relative_to(base), root / d.relative_to(base)) for s, d in pairs]
        finished = not _killed_at(k, lambda: publishing.publish(moved, "b", root / "runs" / "b", log=lambda *_: None))
        shutil.copytree(root, kept)
        for how in TAMPERING:
            shutil.rmtree(root)
            shutil.copytree(kept, root)
            _tampered(root, how)
            run, refused = _submit(root)
            if refused and ".sources.json: not the record" in refused:
                assert how == "garble the record" and "move it away" in refused
                (root / "predictions" / sources.SOURCES).unlink()  # what the line says to do
                run, refused = _submit(root)
            if refused:  # a mix, named with the command that puts one run's set back
                assert "not zipping a mix of runs" in refused and "--mixed" in refused, (k, how, refused)
                assert _one_run(root, lambda n: (root / "predictions" / n).read_bytes()) is None, (k, how)
                fix = refused.split("--publish ")[1].split(")")[0]
                run, refused = _submit(root, runs=[fix])
                assert refused is None, (k, how, refused)
                outcomes.add("refused, then fixed")
            else:
                outcomes.add(f"zipped run {run}")
            assert (root / "predictions" / "mynotes.txt").read_text() == "my notes\n"
            assert _hidden(root) == [], (k, how, _hidden(root))
            assert {p.relative_to(root): p.read_bytes() for p in (root / "runs").rglob("*") if p.is_file()} == \
                snapshot
            if how == "nothing":  # the record as the kill left it: one run's set, b's once the record said so
                assert refused is None and run in ("a", "b"), (k, refused)
        capsys.readouterr()
        if finished:
            break
    assert finished and k > 6 + 1 + 6  # staged files, the record, the renames: each step was a kill point
    assert outcomes == {"zipped run a", "zipped run b", "refused, then fixed"}


def test_the_next_command_puts_the_rest_in_place_from_the_run_folder(tmp_path, monkeypatch):
    """A publishing that failed half way (three files renamed): check_outputs (a new run, or the run's --resume)
    copies the other three from run b's folder, in one line; the record then matches every file."""
    pairs = two_runs_published(tmp_path)
    with monkeypatch.context() as m:
        steps = _interrupt_at(m, 6 + 1 + 4)  # the staged files and the record written, three renames done
        with pytest.raises(Interrupted):
            publishing.publish(pairs, "b", tmp_path / "runs" / "b", log=lambda *_: None)
        assert steps.count("rename") == 4
    assert _one_run(tmp_path, lambda n: (tmp_path / "predictions" / n).read_bytes()) is None
    assert _hidden(tmp_path) == []  # the failed pass removed its temporary files
    lines = []
    publishing.finish_publishing([tmp_path / "predictions"], log=lines.append)
    assert lines == [f"{tmp_path / 'predictions'}: copied run b's para-test-output.csv, sts-dev-output.csv, "
                     f"sts-test-output.csv again from {tmp_path / 'runs' / 'b'}, which an interruption had "
                     "stopped before they were all in place"]
    assert _one_run(tmp_path, lambda n: (tmp_path / "predictions" / n).read_bytes()) == "b"
    assert all(sources.written_by(d)["run"] == "b" for _, d in pairs)
    assert "was" not in json.dumps(json.loads((tmp_path / "predictions" / sources.SOURCES).read_text()))
    outputs.check_outputs(files=[d for _, d in pairs])  # and the next run may replace them


def test_a_file_left_pending_whose_run_copy_changed_is_said_to_stay(tmp_path, monkeypatch):
    """The run's own copy of a file the interruption left unplaced was edited since: it cannot be finished from
    there, and a line says so and what writes it again (it had been skipped without a word)."""
    pairs = two_runs_published(tmp_path)
    with monkeypatch.context() as m:
        _interrupt_at(m, 6 + 1 + 4)
        with pytest.raises(Interrupted):
            publishing.publish(pairs, "b", tmp_path / "runs" / "b", log=lambda *_: None)
    edited = tmp_path / "runs" / "b" / "sts-dev-output.csv"
    edited.write_text(edited.read_text() + "edited\n")
    before = (tmp_path / "predictions" / "sts-dev-output.csv").read_bytes()
    lines = []
    publishing.finish_publishing([tmp_path / "predictions"], log=lines.append)
    assert lines[0].startswith(f"{tmp_path / 'predictions'}: copied run b's para-test-output.csv, sts-test-output.csv "
                               "again from")
    assert lines[1] == (f"{tmp_path / 'predictions'}: run b's sts-dev-output.csv, which an interruption stopped "
                        f"before they were in place, cannot be put there: {tmp_path / 'runs' / 'b'} no longer holds "
                        "what the run wrote (changed or gone), so they stay as they were; the run's training command "
                        "with --resume writes its files again from its best checkpoint")
    assert (tmp_path / "predictions" / "sts-dev-output.csv").read_bytes() == before


def test_prepare_submit_names_each_files_run_and_refuses_a_mix_unless_asked(tmp_path, capsys):
    pairs = two_runs_published(tmp_path)
    for src, dest in pairs[:2]:  # sst's two files from run b, the rest from a: a mix
        shutil.copyfile(src, dest)
    with pytest.raises(MinbertError, match=r"not zipping a mix of runs in .*predictions: sst-dev-output.csv, "
                                           r"sst-test-output.csv from run b \(.*runs/b\); para-dev-output.csv, .* "
                                           r"from run a \(.*runs/a\)\. To submit one run's files, copy its set back "
                                           r"from its run folder \(python .*prepare_submit.py --part 2 --publish "):
        prepare_submit.build(tmp_path, part="2")
    capsys.readouterr()
    prepare_submit.build(tmp_path, part="2", mixed=True)
    out = capsys.readouterr().out.splitlines()
    assert f"from run b ({tmp_path / 'runs' / 'b'}): sst-dev-output.csv, sst-test-output.csv" in out
    assert f"from run a ({tmp_path / 'runs' / 'a'}): para-dev-output.csv, para-test-output.csv, " \
           "sts-dev-output.csv, sts-test-output.csv" in out
    assert any(line.startswith("zipped as they are (--mixed): ") for line in out)
    with pytest.raises(MinbertError, match=r"--publish .*runs/a .*runs/b: both hold sst-dev-output.csv; each "
                                           r"submitted file comes from one run"):
        prepare_submit.main(["--root", str(tmp_path), "--part", "2", "--publish", str(tmp_path / "runs" / "a"),
                             str(tmp_path / "runs" / "b")])
    assert "from run a" not in capsys.readouterr().out  # nothing copied
    with pytest.raises(MinbertError, match=r"--publish .*runs/b/: given twice; each run is published once"):
        prepare_submit.main(["--root", str(tmp_path), "--part", "2", "--publish", str(tmp_path / "runs" / "b"),
                             str(tmp_path / "runs" / "b") + "/"])
    held = tmp_path / "runs" / "b" / "para-test-output.csv"
    kept, before = held.read_text(), snapshot(tmp_path / "predictions")
    held.write_text(kept.splitlines()[0] + "\n")  # the header alone: the zip would refuse it
    with pytest.raises(MinbertError, match=r"not publishing or zipping, minBERT Part 2 would then need: "
                                           r".*runs/b/para-test-output.csv \(empty\)"):
        prepare_submit.main(["--root", str(tmp_path), "--part", "2", "--publish", str(tmp_path / "runs" / "b")])
    assert snapshot(tmp_path / "predictions") == before  # checked before any file was copied
    held.write_text(kept)
    prepare_submit.main(["--root", str(tmp_path), "--part", "2", "--publish", str(tmp_path / "runs" / "b")])
    out = capsys.readouterr().out
    assert "run b's predictions copied to" in out and "replacing those of run a (still in" in out
    assert f"from run b ({tmp_path / 'runs' / 'b'}): {', '.join(P2)}" in out
    # one Part 1 file beside them: without --part, Part 1 is zipped too and refused for its missing files, so
    # run a's files are not published either (the folder stays as it was)
    (tmp_path / "predictions" / prepare_submit.PART1[0]).write_text("id,Predicted_Sentiment\n")
    before = snapshot(tmp_path / "predictions")
    with pytest.raises(MinbertError, match=r"not publishing or zipping, minBERT Part 1 and 2 would then need: "
                                           r"predictions/.* \(empty\), predictions/.* \(missing\)"):
        prepare_submit.main(["--root", str(tmp_path), "--publish", str(tmp_path / "runs" / "a")])
    assert snapshot(tmp_path / "predictions") == before


def test_ctrl_c_while_publishing_waits_and_says_what_was_copied(tmp_path, monkeypatch):
    """A real SIGINT arriving among the renames: every file is put in place and recorded, the line saying so is
    printed, and the interrupt's own line (main_guard) says the files were copied, before KeyboardInterrupt."""
    pairs = two_runs_published(tmp_path)
    cli.set_interrupt_hint("multitask epoch 0 is saved in runs/b/multitask-last.pt; the same command plus "
                             "--resume continues", retry="the same command plus --resume")
    _steps(monkeypatch.setattr, lambda n: n == 9 and os.kill(os.getpid(), signal.SIGINT))
    lines = []
    with pytest.raises(KeyboardInterrupt):
        publishing.publish(pairs, "b", tmp_path / "runs" / "b", log=lines.append)
    assert _one_run(tmp_path, lambda n: (tmp_path / "predictions" / n).read_bytes()) == "b" and _hidden(tmp_path) == []
    assert lines[-1].startswith("run b's predictions copied to ") and "replacing those of run a" in lines[-1]
    assert cli._INTERRUPT_HINT["text"].startswith("run b's predictions were all copied to ")
    cli.set_interrupt_hint(None)


def test_the_run_replaced_is_the_one_there_once_the_folder_is_locked(tmp_path, monkeypatch):
    """Two runs publishing at once: the later one waits for the folder's lock, and names the run whose files it
    found then (here b, which published while c waited), not the one there when it started."""
    pairs = two_runs_published(tmp_path)
    c = tmp_path / "runs" / "c"
    shutil.copytree(tmp_path / "runs" / "a", c)
    real, waited = publishing._locked, []

    def locked(folders):
        if not waited:  # the other process holds the lock until it has published
            waited.append(1)
            publishing.publish(pairs, "b", tmp_path / "runs" / "b", log=lambda *_: None)
        return real(folders)
    monkeypatch.setattr(publishing, "_locked", locked)
    line = publishing.publish([(c / n, d) for (_, d), n in zip(pairs, P2)], "c", c, log=lambda *_: None)
    assert "replacing those of run b (still in" in line and "run a" not in line


def test_a_file_of_the_users_allowed_by_backup_is_kept_however_publishing_ends(tmp_path):
    """--backup: the user's file at a destination is renamed to a dated backup, also when the publishing is killed
    between the record and that rename and the next command finishes it."""
    pairs = two_runs_published(tmp_path)
    dest = pairs[-1][1]
    dest.write_text("the user's own file\n")
    assert _killed_at(6 + 1 + 5, lambda: publishing.publish(pairs, "b", tmp_path / "runs" / "b", log=print))
    assert dest.read_text() == "the user's own file\n"
    publishing.finish_publishing([dest.parent], log=lambda *_: None)
    assert [p.read_text() for p in dest.parent.glob(f"{dest.name}.*.bak")] == ["the user's own file\n"]
    assert _one_run(tmp_path, lambda n: (tmp_path / "predictions" / n).read_bytes()) == "b"


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


def test_protect_and_record_unit(tmp_path):
    a = tmp_path / "a.csv"
    a.write_text("user\n")
    kept = publishing.protect([a, tmp_path / "absent.csv"])
    assert len(kept) == 1 and not a.exists() and kept[0][1].read_text() == "user\n"
    a.write_text("run\n")
    sources.record([a], "r1", tmp_path)
    assert sources.written_by(a)["run"] == "r1" and publishing.protect([a]) == []
    a.write_text("changed\n")
    assert sources.written_by(a) is None and len(publishing.protect([a])) == 1


# ----------------------------------------------------------------------------- end to end: Part 2, Part 1, GPT-2

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
        assert sources.written_by(f) is not None and sources.written_by(f)["dir"] == str(run_folder)
    assert not [p for p in folder.iterdir() if p.name.startswith(".") and p.name != sources.SOURCES]


def test_part2_killed_while_publishing_resumes_and_the_next_run_goes_on(tmp_path, course_data, tiny_model,
                                                                       monkeypatch, capsys):
    """Run b fails half way through putting its files in predictions/ over run a's: its --resume (even with
    --backup) puts the rest back from its run folder without scoring anything again, and a new run c then
    publishes over it; failing while staging, c leaves predictions/ as b left it, and c's --resume publishes."""
    import multitask_classifier as mt
    mt.main(_part2(tmp_path, "a", course_data, tiny_model, "--seed", "7"))
    with monkeypatch.context() as m:
        steps = _interrupt_at(m, 6 + 1 + 3)  # six files staged, the record written, two renames done
        with pytest.raises(Interrupted):
            mt.main(_part2(tmp_path, "b", course_data, tiny_model))
        assert steps.count("rename") == 3
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in (tmp_path / "b" / "ck").glob("*-output.csv")}
    mt.main(_part2(tmp_path, "b", course_data, tiny_model, "--resume", "--backup"))
    out = capsys.readouterr().out
    assert "copied run ck's" in out and "again from" in out and "the run had finished" in out
    assert {p.name: p.read_bytes() for p in (tmp_path / "b" / "ck").glob("*-output.csv")} == before
    _consistent(tmp_path / "pred", tmp_path / "b" / "ck")
    assert not list((tmp_path / "pred").glob("*.bak"))  # nothing of the user's was there to keep
    with monkeypatch.context() as m:
        _interrupt_at(m, 4)  # fails while the fourth file is staged
        with pytest.raises(Interrupted):
            mt.main(_part2(tmp_path, "c", course_data, tiny_model, "--seed", "3"))
    _consistent(tmp_path / "pred", tmp_path / "b" / "ck")
    mt.main(_part2(tmp_path, "c", course_data, tiny_model, "--seed", "3", "--resume"))
    _consistent(tmp_path / "pred", tmp_path / "c" / "ck")


def test_resuming_a_finished_run_never_rewrites_its_predictions(tmp_path, course_data, tiny_model, capsys):
    """--resume of a run that finished (here with --amp none, which would score differently): nothing is trained
    or scored again, the run folder's files stay byte for byte, the results table keeps one row, and the run's
    files are published again (put back over another run's), each said in a line; other output paths or another
    --results table are refused in one line, not silently left unused."""
    import multitask_classifier as mt
    mt.main(_part2(tmp_path, "a", course_data, tiny_model, "--seed", "7"))
    folder, results = tmp_path / "a" / "ck", tmp_path / "pred" / "results.csv"
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix in (".csv", ".npz")}
    mt.main(_part2(tmp_path, "b", course_data, tiny_model, "--seed", "3"))
    rows = results.read_text()
    capsys.readouterr()
    mt.main(_part2(tmp_path, "a", course_data, tiny_model, "--seed", "7", "--resume", "--amp", "none"))
    out = capsys.readouterr().out
    assert "the run had finished, nothing is left to train" in out and "not scored again" in out
    assert "replacing those of run ck (still in" in out
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.suffix in (".csv", ".npz")} == before
    _consistent(tmp_path / "pred", folder)
    assert results.read_text() == rows
    # the same folders spelled another way ("/./", a trailing "/") are the same paths
    respelled = [a.replace(str(tmp_path / "pred"), f"{tmp_path}/./pred/") for a in
                 _part2(tmp_path, "a", course_data, tiny_model, "--seed", "7", "--resume")]
    mt.main(respelled)
    assert "the run had finished, nothing is left to train" in capsys.readouterr().out
    assert results.read_text() == rows
    with pytest.raises(MinbertError, match=r"the run had finished, and --resume neither scores it again nor publishes "
                                           r"it under other paths than its own"):
        mt.main(_part2(tmp_path, "a", course_data, tiny_model, "--seed", "7", "--resume", "--sst_dev_out",
                       str(tmp_path / "elsewhere.csv")))
    assert not (tmp_path / "elsewhere.csv").exists()
    with pytest.raises(MinbertError, match=r"the run had finished and its row is in .*results.csv; --resume scores "
                                           r"nothing again, so it has no row for --results .*other.csv"):
        mt.main(_part2(tmp_path, "a", course_data, tiny_model, "--seed", "7", "--resume", "--results",
                       str(tmp_path / "other.csv")))
    assert not (tmp_path / "other.csv").exists()


def test_part1_killed_while_publishing_resumes(tmp_path, course_data, tiny_model, monkeypatch):
    """classifier.py publishes through the same code (as do pretrain.py, ensemble.py and the GPT-2 scripts)."""
    import classifier
    from tests.course import part1_args
    args = part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst", "--epochs", "1")
    classifier.main(args + ["--seed", "7"])
    before = {p.name: p.read_bytes() for p in (tmp_path / "pred").glob("*.csv")}
    with monkeypatch.context() as m:
        _interrupt_at(m, 2 + 1 + 1)  # the dev and test files staged, the record written, one rename done
        with pytest.raises(Interrupted):
            classifier.main(part1_args(tmp_path / "b", course_data, tiny_model, "--datasets", "sst", "--epochs", "1",
                                       "--predictions_dir", str(tmp_path / "pred")))
    classifier.main(part1_args(tmp_path / "b", course_data, tiny_model, "--datasets", "sst", "--epochs", "1",
                               "--predictions_dir", str(tmp_path / "pred"), "--resume"))
    after = {p.name: p.read_bytes() for p in (tmp_path / "pred").glob("*.csv")}
    assert sorted(after) == sorted(before) and after != before
    for name, data in after.items():
        assert data == (tmp_path / "b" / "ck" / name).read_bytes() and sources.written_by(tmp_path / "pred" / name)


def test_gpt2_killed_while_publishing_resumes(tmp_path, course_data, tiny_gpt2, monkeypatch):
    """Build GPT-2's scripts publish through the same code: paraphrase_detection.py failing among its renames, its
    --resume completes predictions/."""
    from gpt2 import paraphrase_detection
    args = ["--pretrained", str(tiny_gpt2), "--data_dir", str(course_data), "--epochs", "1", "--lr", "1e-3",
            "--run_dir", str(tmp_path / "run"), "--predictions_dir", str(tmp_path / "pred")]
    with monkeypatch.context() as m:
        _interrupt_at(m, 2 + 1 + 1)  # both files staged, the record written, one rename done
        with pytest.raises(Interrupted):
            paraphrase_detection.main(args)
    paraphrase_detection.main(args + ["--resume"])
    for split in ("dev", "test"):
        name = f"para-{split}-output.csv"
        assert (tmp_path / "pred" / name).read_bytes() == (tmp_path / "run" / name).read_bytes()
        assert sources.written_by(tmp_path / "pred" / name)["dir"] == str(tmp_path / "run")
    assert "was" not in (tmp_path / "pred" / sources.SOURCES).read_text()


def test_sigterm_while_publishing_waits_until_every_file_is_in_place(tmp_path):
    """`kill PID` (SIGTERM) at any step of publishing: the process finishes the copy, then ends as SIGTERM ends it;
    predictions/ holds run b's six files and no temporary file, before any other command runs."""
    base = tmp_path / "base"
    pairs = two_runs_published(base)
    for k in (1, 6, 7, 8, 13):
        root = tmp_path / str(k)
        shutil.copytree(base, root)
        moved = [(root / s.relative_to(base), root / d.relative_to(base)) for s, d in pairs]
        assert _killed_at(k, lambda: publishing.publish(moved, "b", root / "runs" / "b", log=lambda *_: None),
                          signal.SIGTERM), k
        assert _one_run(root, lambda n: (root / "predictions" / n).read_bytes()) == "b" and _hidden(root) == [], k


def test_ctrl_c_while_a_tool_writes_its_file_says_it_was_written(tmp_path):
    """A SIGINT in the middle of a tool's output (the submission zip, a --json): the file is written whole and
    recorded, and the interrupt's line names it as written, not 'this command had written nothing yet'."""

    def write(fp):
        fp.write(b"first half, ")
        os.kill(os.getpid(), signal.SIGINT)
        fp.write(b"second half")
    cli.set_interrupt_hint(None)
    with pytest.raises(KeyboardInterrupt):
        publishing.write_output(tmp_path / "out.zip", write, "prepare_submit.py")
    assert (tmp_path / "out.zip").read_bytes() == b"first half, second half"
    assert sorted(p.name for p in tmp_path.iterdir()) == [sources.SOURCES, "out.zip"]
    assert sources.written_by(tmp_path / "out.zip")["run"] == "prepare_submit.py"
    assert cli._INTERRUPT_HINT["text"] == f"{tmp_path / 'out.zip'} written whole before the interrupt took effect"
    cli.set_interrupt_hint(None)


def test_resuming_a_finished_run_whose_file_was_edited_or_deleted_writes_its_outputs_again(tmp_path, course_data,
                                                                                           tiny_model, capsys):
    """A file the finished run wrote for publishing, edited by hand (same name, other bytes) or deleted, its
    published copy deleted too: --resume says which and writes the run's outputs again from its best checkpoint,
    the file then as the run wrote it."""
    import multitask_classifier as mt
    mt.main(_part2(tmp_path, "a", course_data, tiny_model, "--seed", "7"))
    target = tmp_path / "a" / "ck" / "sst-dev-output.csv"
    written = target.read_bytes()

    def edit():
        target.write_bytes(written.replace(b" , ", b" ,  ", 1))

    from minbert.submit import MINBERT, publish_runs
    edit()  # --publish of the edited run: refused, the file named (a zip would hold what no run wrote)
    with pytest.raises(MinbertError, match=r"--publish .*ck: sst-dev-output.csv has changed since run ck wrote it "
                                           r"\(its record holds another sha256\): .* plus --resume writes"):
        publish_runs([tmp_path / "a" / "ck"], tmp_path, MINBERT, ["2"])
    target.write_bytes(written)
    for damage, said in ((edit, "changed since"), (target.unlink, "missing, though")):
        damage()
        (tmp_path / "pred" / "sst-dev-output.csv").unlink()  # its published copy too
        capsys.readouterr()
        mt.main(_part2(tmp_path, "a", course_data, tiny_model, "--seed", "7", "--resume"))
        assert f"{target}: {said} the run wrote it; mt's outputs are written again" in capsys.readouterr().out
        assert target.read_bytes() == written


def test_a_publishing_into_two_folders_cut_short_is_finished_by_a_command_writing_into_one(tmp_path, course_data,
                                                                                          tiny_model, capsys):
    """Run b publishes SST and Quora into predictions/ and STS into other/, and fails after predictions/ is done:
    the next run, writing into predictions/ alone, finishes other/ too and says so, not only its own folder."""
    import multitask_classifier as mt

    def sts_elsewhere(args):
        for split in ("dev", "test"):
            args[args.index(f"--sts_{split}_out") + 1] = str(tmp_path / "other" / f"sts-{split}-output.csv")
        return args
    mt.main(sts_elsewhere(_part2(tmp_path, "a", course_data, tiny_model, "--seed", "7")))
    with pytest.MonkeyPatch.context() as m:
        # both folders marked, six files staged, both records written, four renames done
        steps = _interrupt_at(m, 2 + 6 + 2 + 5)
        with pytest.raises(Interrupted):
            mt.main(sts_elsewhere(_part2(tmp_path, "b", course_data, tiny_model)))
        assert steps.count("rename") == 5 and steps.count("record") == 4
    b = tmp_path / "b" / "ck"
    assert (tmp_path / "other" / "sts-dev-output.csv").read_bytes() != (b / "sts-dev-output.csv").read_bytes()
    capsys.readouterr()
    mt.main(_part2(tmp_path, "c", course_data, tiny_model, "--seed", "3"))  # all six into predictions/
    out = capsys.readouterr().out
    assert f"{tmp_path / 'other'}: copied run ck's sts-dev-output.csv, sts-test-output.csv again from {b}" in out
    for split in ("dev", "test"):
        name = f"sts-{split}-output.csv"
        assert (tmp_path / "other" / name).read_bytes() == (b / name).read_bytes()
    _consistent(tmp_path / "pred", tmp_path / "c" / "ck")


def _two_folders(root):
    """two_runs_published, with run a's SST files in other/ as well; returns the pairs run b publishes: its SST files
    into other/ (first), the rest into predictions/."""
    pairs = two_runs_published(root)
    (root / "other").mkdir()
    publishing.publish([(root / "runs" / "a" / d.name, root / "other" / d.name) for _, d in pairs[:2]], "a",
                       root / "runs" / "a", log=lambda *_: None)
    return [(s, root / "other" / d.name if d.name.startswith("sst") else d) for s, d in pairs]


def _left(folder):
    """What a killed publishing left in `folder`: its hidden files, and the files its record says are pending
    that do not hold their new bytes yet."""
    from minbert.files import file_digest
    record = json.loads((folder / sources.SOURCES).read_text()) if (folder / sources.SOURCES).is_file() else {}
    return ([p.name for p in folder.iterdir() if p.name.startswith(".") and p.name != sources.SOURCES],
            sorted(n for n, e in record.items() if isinstance(e, dict) and "was" in e
                   and not ((folder / n).is_file() and file_digest(folder / n) == e["sha256"])))


def test_a_publishing_into_two_folders_killed_at_any_step_is_settled_by_a_command_writing_into_one(tmp_path):
    """Run b's publishing into other/ and predictions/, killed before each of its steps; then a command writing
    into predictions/ alone (finish_publishing, as check_outputs calls it) settles other/ as well: the two folders
    hold one run's files (a's, or b's once the publishing could be finished), nothing stays pending or hidden in
    either, every entry of each record names a file there, and what the kill had left in other/ is named in a line."""
    base = tmp_path / "base"
    pairs = _two_folders(base)
    outcomes = set()
    for k in range(1, 40):
        root = tmp_path / f"killed-{k}"
        shutil.copytree(base, root)
        moved = [(root / s.relative_to(base), root / d.relative_to(base)) for s, d in pairs]
        finished = not _killed_at(k, lambda: publishing.publish(moved, "b", root / "runs" / "b", log=lambda *_: None))
        left = _left(root / "other")
        lines = []
        publishing.finish_publishing([root / "predictions"], log=lines.append)
        held = set.intersection(*(_holder(root, d.read_bytes(), d.name) for _, d in moved))
        assert len(held) == 1, (k, [(d.name, _holder(root, d.read_bytes(), d.name)) for _, d in moved])
        outcomes |= held
        for folder in (root / "predictions", root / "other"):
            assert _left(folder) == ([], []), (k, folder.name, _left(folder))
            record = sources.read_record(folder)
            assert set(record) <= {p.name for p in folder.iterdir()}, (k, folder.name, sorted(record))
            assert not [n for n, e in record.items() if "was" in e], (k, folder.name, record)
        if left != ([], []):
            assert any(str(root / "other") in line for line in lines), (k, left, lines)
        if finished:
            break
    assert finished and outcomes == {"a", "b"}


def test_publish_names_a_path_that_is_no_folder_as_what_it_is(tmp_path):
    """--publish of a path that does not exist, a file or a broken link: each said so (not "no .minbert-run in
    it"), before anything is copied."""
    two_runs_published(tmp_path)
    (tmp_path / "afile").write_text("x\n")
    (tmp_path / "dangling").symlink_to(tmp_path / "gone")
    before = {p.name: p.read_bytes() for p in (tmp_path / "predictions").iterdir()}
    for path, what in (("nope", "no such folder"), ("afile", "a file"),
                       ("dangling", r"a broken link \(its target is missing\)")):
        with pytest.raises(MinbertError, match=rf"^--publish .*{path}: {what}: give the folder of a finished run"):
            prepare_submit.main(["--root", str(tmp_path), "--part", "2", "--publish", str(tmp_path / path)])
    # a run of the other default project: its files belong in the other zip (a Build GPT-2 run's files had been
    # zipped as minBERT's where they fitted); this project's own pipelines, or a mark naming none, are taken
    from minbert.submit import MINBERT, check_run_to_publish
    (tmp_path / "runs" / "b" / ".minbert-run").write_text('{"pipeline": "gpt2-paraphrase"}\n')
    with pytest.raises(MinbertError, match=r"^--publish .*b: the folder of a gpt2/paraphrase_detection.py run, not "
                                           r"of a minBERT run; its files go into the other project's zip$"):
        prepare_submit.main(["--root", str(tmp_path), "--part", "2", "--publish", str(tmp_path / "runs" / "b")])
    for pipeline in ('"multitask"', '"ensemble"', "null"):
        (tmp_path / "runs" / "b" / ".minbert-run").write_text(f'{{"pipeline": {pipeline}}}\n')
        check_run_to_publish(tmp_path / "runs" / "b", MINBERT)
    # a folder of prediction files that is no run: said so, not a list of what its files lack for the zip
    (tmp_path / "loose").mkdir()
    (tmp_path / "loose" / "sst-dev-output.csv").write_text("id,Predicted_Sentiment\nx,1\n")
    with pytest.raises(MinbertError, match=r"^--publish .*loose: not a run folder \(no .minbert-run in it\)"):
        prepare_submit.main(["--root", str(tmp_path), "--part", "2", "--publish", str(tmp_path / "loose")])
    assert {p.name: p.read_bytes() for p in (tmp_path / "predictions").iterdir()} == before


def test_a_folder_reached_through_a_link_is_one_folder(tmp_path):
    """Two outputs in one folder, one spelled through a link to it: published once, under one record (the folder
    had been locked twice by the one process, which then waited on itself for ever, deaf to Ctrl-C); one file
    spelled both ways is two outputs naming the same file."""
    import threading
    run = tmp_path / "runs" / "a"
    run.mkdir(parents=True)
    (run / "x.csv").write_text("x\n")
    (run / "y.csv").write_text("y\n")
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    pairs = [(run / "x.csv", real / "x.csv"), (run / "y.csv", tmp_path / "link" / "y.csv")]
    worker = threading.Thread(target=publishing.publish, args=(pairs, "a", run), kwargs={"log": print}, daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "publishing waited on its own lock"
    assert (real / "x.csv").read_text() == "x\n" and (real / "y.csv").read_text() == "y\n"
    assert set(sources.read_record(real)) == {"x.csv", "y.csv"}
    assert publishing.same_file(real / "z.csv", tmp_path / "link" / "z.csv")  # neither there yet
    with pytest.raises(MinbertError, match=r"link/z.csv: .*real/z.csv names the same file"):
        outputs.check_outputs(files=[("--sst_dev_out", real / "z.csv"), ("--sst_test_out", tmp_path / "link" / "z.csv")])
