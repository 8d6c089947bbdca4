"""sweeps/winner.py: the sweep warns that its best trial on dev is biased upward and prints the commands that re-run
it on fresh seeds and compare; with --baseline the winning trial's runs are compared with the baseline's at once;
a --baseline without dev outputs, of another script or of two configurations is refused before any trial runs; a
trial that ran whole is complete; the winning command names its seed."""
import textwrap

import numpy as np
import pytest

import sweep
from minbert.sweeps import trials
from minbert.sweeps.winner import fresh_seeds, rerun_commands
from tests.course import COMPARED_GOLD, COMPARED_IDS, make_compared_run
from utils import MinbertError

# A classifier.py stand-in: its run folder gets a log and SST dev outputs right on 60% of the examples (lr 1e-4)
# or 90% (lr 2e-4), with seeded noise; what report.py --compare reads, without training anything.
FAKE_PIPELINE = textwrap.dedent('''
    import json, sys
    from pathlib import Path
    import numpy as np
    a = sys.argv
    folder = Path(a[a.index("--run_dir") + 1])
    skill = 0.9 if float(a[a.index("--lr") + 1]) > 1.5e-4 else 0.6
    rng = np.random.default_rng(int(a[a.index("--seed") + 1]))
    n = 400
    gold = np.arange(n) % 5
    pred = np.where(rng.random(n) < skill, gold, (gold + 1) % 5)
    folder.mkdir(parents=True)
    np.savez(folder / "full-model-sst-dev-scores.npz", task=np.array("sst"), ids=np.array([f"e{k}" for k in range(n)]),
             gold=gold.astype(float), pred=pred.astype(float))
    with open(folder / "full-model-sst-log.jsonl", "w") as fp:
        fp.write(json.dumps({"epoch": 0, "dev_score": float(np.mean(pred == gold))}) + "\\n")
''')


def test_the_winner_is_compared_with_the_baseline_and_the_bias_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    fake = tmp_path / "fake.py"
    fake.write_text(FAKE_PIPELINE)
    monkeypatch.setitem(trials.PIPELINES, "classifier", fake)
    baseline = []
    for s in (1, 2, 3):
        rng = np.random.default_rng(100 + s)
        gold = COMPARED_GOLD["sst"]
        pred = np.where(rng.random(len(gold)) < 0.6, gold, (gold + 1) % 5)
        baseline.append(str(make_compared_run(tmp_path / "runs" / f"base-{s}", {"sst": (COMPARED_IDS, gold, pred)})))
    result = sweep.main(["classifier", "--trials", "2", "--space", "lr=1e-4,2e-4", "--sampler", "grid", "--no_prune",
                         "--study", "w", "--seeds", "1", "2", "3", "--baseline", *baseline, "--",
                         "--datasets", "sst", "--fine-tune-mode", "full-model"])
    out = capsys.readouterr().out
    assert result["best_params"] == {"lr": "2e-4"}
    assert "note: the best of 2 trials on the dev set is biased upward" in out
    assert "  python fake.py --datasets sst --fine-tune-mode full-model --lr 2e-4 --seed 4 --run_name w-best-s4" in out
    assert f"  python report.py --compare --baseline {' '.join(baseline)} --candidate runs/w-best-s*" in out
    # the winning command runs a seed the trial ran (without --seed it had run the default, which none did)
    assert ("winning command (its first seed; --seed 2, ... for the others): python fake.py --datasets sst "
            "--fine-tune-mode full-model --lr 2e-4 --seed 1") in out
    (row,) = result["against_baseline"]
    assert row.candidate in ("t0-s*", "t1-s*") and row.task == "sst" and row.verdict == "better"
    assert row.baseline == "base-*" and row.a.endswith("(3 seeds)") and row.b.endswith("(3 seeds)")
    assert row.seeds.startswith("ASO ε_min 0.00 (B over A)")


def test_fresh_seeds_and_commands_without_a_baseline():
    assert fresh_seeds([11711, 2, 42]) == [1, 3, 4]
    lines = rerun_commands("multitask", ["--epochs", "1"], {"lr": 3e-5}, "a/b", [11711])
    assert lines[0] == "python multitask_classifier.py --epochs 1 --lr 3e-05 --seed 1 --run_name a-b-best-s1"
    # the globs unquoted, so that the line typed as printed (BASELINE replaced) reaches the shell as globs
    assert lines[-1] == "python report.py --compare --baseline runs/BASELINE-s* --candidate runs/a-b-best-s*"
    lines = rerun_commands("multitask", [], {"lr": 3e-5}, "s", [1], baseline=["runs/my base-1"])
    assert lines[-1] == "python report.py --compare --baseline 'runs/my base-1' --candidate runs/s-best-s*"


def test_a_baseline_without_dev_outputs_is_refused_before_any_trial(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(MinbertError, match=r"empty: no dev outputs"):
        sweep.main(["classifier", "--space", "lr=1e-4,2e-4", "--baseline", "empty", "--", "--datasets", "sst"])
    assert not (tmp_path / "runs").exists()


def test_a_baseline_of_another_scripts_runs_is_refused_before_any_trial(tmp_path, monkeypatch):
    """A Part 1 sweep against Part 2 runs would compare the tasks they share and leave the rest out: refused in one
    line naming both scripts; a baseline of the sweep's own script, or one whose folder names none, is taken."""
    from minbert.sweeps.winner import check_baseline
    monkeypatch.chdir(tmp_path)
    gold = COMPARED_GOLD["sst"]
    part2 = make_compared_run(tmp_path / "p2", {"sst": (COMPARED_IDS, gold, gold)}, flags={}, pipeline="multitask")
    with pytest.raises(MinbertError, match=rf"^--baseline {part2}: the folder of a multitask_classifier.py run, and "
                                           r"this sweep's trials are classifier.py runs: give baseline runs of the "
                                           r"same script$"):
        sweep.main(["classifier", "--space", "lr=1e-4,2e-4", "--baseline", str(part2), "--", "--datasets", "sst"])
    assert not (tmp_path / "runs").exists()
    part1 = make_compared_run(tmp_path / "p1", {"sst": (COMPARED_IDS, gold, gold)}, flags={}, pipeline="classifier")
    unmarked = make_compared_run(tmp_path / "ens", {"sst": (COMPARED_IDS, gold, gold)})
    check_baseline([part1, unmarked], tmp_path, "classifier")


def test_baselines_of_two_configurations_are_refused_before_any_trial(tmp_path, monkeypatch):
    """A group over seeds repeats one configuration: checked before the sweep's hours of trials, not after them."""
    monkeypatch.chdir(tmp_path)
    gold = COMPARED_GOLD["sst"]
    runs = [str(make_compared_run(tmp_path / f"b{s}", {"sst": (COMPARED_IDS, gold, gold)}, pipeline="classifier",
                                  flags={"seed": s, "lr": lr})) for s, lr in ((1, 1e-4), (2, 2e-4))]
    monkeypatch.setattr(trials, "run_trial", lambda *a: pytest.fail("a trial ran before the baseline was checked"))
    with pytest.raises(MinbertError, match=r"^--baseline: .*b1 and .*b2 differ beyond the seed \(--lr 0.0001 "
                                           r"against 0.0002\)"):
        sweep.main(["classifier", "--space", "lr=1e-4,2e-4", "--baseline", *runs, "--", "--datasets", "sst"])
    assert not (tmp_path / "runs").exists()


def test_the_baseline_is_read_against_the_trials_data(tmp_path, monkeypatch):
    """Its dev outputs are scored on the trials' --data_dir (it had been the project's data/)."""
    from minbert.sweeps import study
    seen = []

    def check(folders, data_dir, pipeline):
        seen.append(data_dir)
        raise MinbertError("checked")
    monkeypatch.setattr(study, "check_baseline", check)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MinbertError, match="^checked$"):
        sweep.main(["classifier", "--space", "lr=1e-4,2e-4", "--baseline", "b", "--", "--datasets", "sst",
                    "--data_dir", str(tmp_path / "mine")])
    assert seen == [str(tmp_path / "mine")]


def test_a_trial_that_ran_its_last_epoch_is_complete_not_pruned(tmp_path, monkeypatch, capsys):
    """The pruner stops a trial to save its remaining epochs; after the last seed's last there are none: a trial
    below the median there had been marked pruned, and left out of the ranked table, after running whole."""
    from minbert.sweeps import study
    monkeypatch.chdir(tmp_path)
    scores = iter([0.9, 0.1, 0.9, 0.1])  # the second trial far below the first at the same (and last) step

    def one_epoch(pipeline, base, values, seeds, folder, number, report):
        score = next(scores)
        report(0, score)  # --epochs 1, one seed: step 0 is the last
        return [score], [folder / f"t{number}"]
    monkeypatch.setattr(study, "run_trial", one_epoch)
    sweep.main(["classifier", "--trials", "2", "--space", "lr=2e-4,1e-4", "--sampler", "grid", "--prune_startup",
                "1", "--study", "p", "--seeds", "1", "--", "--datasets", "sst", "--epochs", "1"])
    out = capsys.readouterr().out
    assert "p: 2 complete, 0 pruned, 0 failed on their flags" in out
    assert "wanting 2; worker" in out  # --trials 2 and a space of 2: nothing cut
    sweep.main(["classifier", "--trials", "5", "--space", "lr=2e-4,1e-4", "--sampler", "grid", "--study", "q", "--seeds",
                "1", "--", "--datasets", "sst", "--epochs", "1"])
    assert "wanting 2 (the space's 2 configurations, of --trials 5); worker" in capsys.readouterr().out


def test_a_baseline_that_differs_beyond_the_searched_flags_is_named(tmp_path, monkeypatch, capsys):
    """A baseline at another budget (or any flag the sweep did not search) is compared, with one note naming the
    difference: the comparison measures it too (it had been silent)."""
    from minbert.sweeps import study
    monkeypatch.chdir(tmp_path)
    gold = COMPARED_GOLD["sst"]
    wrong = (gold + 1) % 5

    def trial(pipeline, base, values, seeds, folder, number, report):
        pred = np.where(np.arange(len(gold)) % (number + 2) == 0, wrong, gold)
        run = make_compared_run(folder / f"t{number}", {"sst": (COMPARED_IDS, gold, pred)}, pipeline="classifier",
                                flags={"seed": 1, "lr": float(values["lr"]), "epochs": 1})
        return [float(np.mean(pred == gold))], [run]
    monkeypatch.setattr(study, "run_trial", trial)
    base = make_compared_run(tmp_path / "base", {"sst": (COMPARED_IDS, gold, wrong)}, pipeline="classifier",
                             flags={"seed": 5, "lr": 1e-4, "epochs": 3})
    sweep.main(["classifier", "--trials", "2", "--space", "lr=2e-4,3e-4", "--sampler", "grid", "--no_prune",
                "--study", "d", "--seeds", "1", "--baseline", str(base), "--", "--datasets", "sst", "--epochs", "1"])
    assert ("note: the baseline's runs and trial 1's differ beyond the searched flags too (--epochs 3 against 1): "
            "the comparison measures those as well") in capsys.readouterr().out
