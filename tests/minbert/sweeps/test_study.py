"""sweeps/study.py: Ctrl-C then the same command evaluates each configuration once (trials on the stub pipeline);
a trial whose flags clash fails alone and the sweep goes on (real trials, end to end)."""
import signal

from tests.processes import run_main, start_sweep, stop_during_trial, stub_trials, sweep_base, sweep_trials


def test_ctrl_c_then_rerun_evaluates_each_configuration_once(tmp_path, monkeypatch, course_data, tiny_model):
    # two epochs: the trial is stopped after its first, with the second still to run
    argv = ["classifier", "--trials", "3", "--space", "lr=log:1e-4:1e-2", "--study", "s", "--no_prune", "--",
            *sweep_base(course_data, tiny_model, epochs=2)]
    out, err = stop_during_trial(start_sweep(tmp_path, argv, hold=2), tmp_path / "runs" / "sweeps" / "s", 2,
                                 signal.SIGINT)
    assert "Traceback" not in err
    line = [l for l in err.splitlines() if l.startswith("interrupted:")]
    assert line and "continue the sweep with: python sweep.py classifier --trials 3" in line[0], (out[-3000:], err[-3000:])
    stub_trials(monkeypatch)
    done = run_main("sweep.py", *argv, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    trials = sweep_trials(tmp_path, "s")
    complete = [t for t in trials if t.state.name == "COMPLETE"]
    assert len(complete) == 3 and len({t.params["lr"] for t in complete}) == 3  # no configuration twice
    interrupted = [t for t in trials if t.state.name == "FAIL" and t.user_attrs.get("interrupted")]
    assert len(interrupted) == 1 and interrupted[0].params in [t.params for t in complete]  # it ran again
    assert "winning command: python stub_trial.py" in done.stdout
    assert not (tmp_path / "predictions").exists()  # trials never touch the user's predictions/


def test_an_incompatible_trial_fails_alone_and_the_sweep_goes_on(tmp_path, course_data, tiny_model):
    """SMART perturbs BERT's embeddings, which last-linear-layer never runs: that trial fails in one line; the
    other one runs."""
    done = run_main("sweep.py", "classifier", "--sampler", "grid", "--trials", "2", "--space",
                    "fine-tune-mode=full-model,last-linear-layer", "--study", "m", "--no_prune", "--",
                    *[a for a in sweep_base(course_data, tiny_model, smart_weight=1)
                      if a not in ("--fine-tune-mode", "full-model")], cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    failed = [l for l in done.stdout.splitlines() if " failed: " in l and l.startswith("trial")]
    assert len(failed) == 1 and "--smart_weight needs the gradient at BERT's embeddings" in failed[0]
    assert "1 complete, 0 pruned, 1 failed on their flags" in done.stdout


def test_ctrl_c_as_a_finished_trial_is_recorded_keeps_it(tmp_path, monkeypatch, course_data, tiny_model):
    """A Ctrl-C arriving while a trial whose seeds all ran is being written to trials.csv waits: the trial is
    complete in the study and in the table, and the next start does not run it again."""
    import os
    import sweep
    from minbert.sweeps import study as study_module
    from tests.processes import sweep_trials as trials_of
    monkeypatch.chdir(tmp_path)
    stub_trials(monkeypatch)
    real = study_module.append_row

    def append_then_ctrl_c(path, row):
        os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C arrives as the row is written
        real(path, row)
    monkeypatch.setattr(study_module, "append_row", append_then_ctrl_c)
    argv = _interrupted_grid("k", course_data, tiny_model)
    trials = trials_of(tmp_path, "k")
    assert [t.state.name for t in trials] == ["COMPLETE"] and not trials[0].user_attrs["interrupted"]
    rows = (tmp_path / "runs" / "sweeps" / "k" / "trials.csv").read_text().splitlines()
    assert len(rows) == 2 and ",complete," in rows[1]
    monkeypatch.setattr(study_module, "append_row", real)
    assert sweep.main(argv)["trials"] == 2
    trials = trials_of(tmp_path, "k")
    assert [t.state.name for t in trials] == ["COMPLETE", "COMPLETE"]
    assert trials[0].params != trials[1].params  # the kept trial did not run again


def test_a_second_ctrl_c_while_the_stopped_trial_is_queued_waits_for_the_record_and_the_line(tmp_path, monkeypatch,
                                                                                             course_data, tiny_model):
    """The second of two quick Ctrl-Cs had landed while the stopped trial was being queued again: the trial stayed
    RUNNING and the line said the command had written nothing, after a finished trial."""
    import os
    from minbert import cli
    from minbert.sweeps import study as study_module
    from tests.processes import sweep_trials as trials_of
    monkeypatch.chdir(tmp_path)
    stub_trials(monkeypatch)
    real = study_module.requeue_interrupted

    def second_ctrl_c(study):
        os.kill(os.getpid(), signal.SIGINT)
        return real(study)
    monkeypatch.setattr(study_module, "requeue_interrupted", second_ctrl_c)
    runs = iter([None, KeyboardInterrupt])  # the first trial runs; Ctrl-C in the second

    def trial_or_ctrl_c(*args, **kwargs):
        if next(runs) is KeyboardInterrupt:
            raise KeyboardInterrupt
        return stub(*args, **kwargs)
    stub = study_module.run_trial
    monkeypatch.setattr(study_module, "run_trial", trial_or_ctrl_c)
    _interrupted_grid("q", course_data, tiny_model)
    assert [t.state.name for t in trials_of(tmp_path, "q")] == ["COMPLETE", "FAIL", "WAITING"]
    assert cli._INTERRUPT_HINT["text"].startswith("this worker's trial was stopped and is queued to run again; "
                                                  "continue the sweep with: python sweep.py classifier")


def _interrupted_grid(study, course_data, tiny_model):
    """A two-trial grid sweep of `study` run under a terminal's Ctrl-C, which the test makes arrive; returns its
    command line (the same again continues it)."""
    import pytest
    import sweep
    argv = ["classifier", "--sampler", "grid", "--trials", "2", "--space", "lr=1e-3,2e-3", "--study", study,
            "--no_prune", "--", *sweep_base(course_data, tiny_model)]
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal gives it
    try:
        with pytest.raises(KeyboardInterrupt):
            sweep.main(argv)
    finally:
        signal.signal(signal.SIGINT, previous)
    return argv
