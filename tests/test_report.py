"""report.py on tiny generated runs: the files appear as valid PNGs of the stated size, the numbers in the
figures are the ones a hand count or minbert/scoring.py gives, bad logs are one line, and a comparison loads
none of the libraries that take seconds to import."""
import json
import re
import subprocess
import sys

import pytest

import report
from tests.course import ROOT, make_multitask_run, make_part2_run
from tests.processes import run_main
from utils import MinbertError


def test_a_comparison_imports_no_torch_scipy_or_scikit_learn(tmp_path):
    """report.py trains nothing: comparing two runs over seeds (their recorded flags read too) and writing its
    table and figure loads neither torch nor scipy nor scikit-learn, seconds of a command's start. In a
    process of its own: what it imported is the subject."""
    runs = [str(make_part2_run(tmp_path / f"{arm}-{s}", skill, s, {"lr": lr}))
            for arm, skill, lr in (("a", 0.6, 1e-4), ("b", 0.7, 2e-4)) for s in (1, 2, 3)]
    code = ("import json, sys, report\n"
            f"report.main(['--compare', '--baseline', *{runs[:3]!r}, '--candidate', *{runs[3:]!r}, "
            f"'--resamples', '200', '--out', {str(tmp_path / 'cmp')!r}])\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'scipy', 'sklearn'))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []
    assert (tmp_path / "cmp" / "comparison.md").is_file() and (tmp_path / "cmp" / "comparison.png").is_file()


def test_missing_or_truncated_log_is_one_line(tmp_path):
    run, _ = make_multitask_run(tmp_path / "r")
    with open(run / "multitask.jsonl", "a") as fp:
        fp.write('{"epoch": 3, "train_lo')
    with pytest.raises(MinbertError, match=r"multitask.jsonl: line 4: truncated or not JSON"):
        report.main([str(run), "--out", str(tmp_path / "out")])
    out = run_main("report.py", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o"))
    assert out.returncode == 2 and out.stderr.strip() == f"error: {tmp_path / 'nope.jsonl'}: log not found"


@pytest.mark.parametrize("argv, match", [
    (["--baseline", "a"], r"--baseline belongs to --compare: as given it would change nothing"),
    (["--compare"], r"report.py --compare: give two runs \(RUN_A RUN_B\), or groups of runs over seeds"),
    (["--compare", "a", "--baseline", "b", "--candidate", "c"], r"--compare a: give either runs \(RUN_A RUN_B\) or "
                                                                r"groups"),
    (["--compare", "--baseline", "a"], r"--baseline needs at least one --candidate RUN"),
    (["--compare", "--candidate", "a"], r"--candidate needs --baseline RUN... \(or --handout\)"),
    (["--compare", "--handout", "--baseline", "a", "--candidate", "b"], r"--handout is the baseline"),
    (["--compare", "--results", "r.csv", "a", "b"], r"--results and --compare: one at a time"),
    (["--compare", "a", "b", "--data_dir", "/nonexistent"], r"--data_dir /nonexistent: no such folder"),
    (["--compare", "--handout", "a", "b"], r"--compare --handout a b: --handout compares runs with the handout's "
                                           r"published means: give them as --candidate RUN..."),
    (["--compare", "a", "b", "--resamples", "1000001"], r"--resamples.*an integer from 100 to 1,000,000"),
    (["--compare", "a", "b", "--resamples", "99"], r"--resamples.*an integer from 100 to 1,000,000"),
])
def test_compare_flags_are_checked_in_one_line(argv, match):
    with pytest.raises(MinbertError, match=match):
        report.main(argv)


def test_two_real_part2_runs_compare_on_the_scores_they_logged(tmp_path, course_data, tiny_model, capsys):
    """multitask_classifier.py's dev outputs, read back by report.py --compare: each run's scores are the ones its
    log reports for the epoch it kept, and the comparison goes to --out, beside neither run."""
    import json
    import multitask_classifier
    from tests.course import part2_args, snapshot
    for seed in (1, 2):
        multitask_classifier.main(part2_args(tmp_path, course_data, tiny_model, "--run_dir", str(tmp_path / f"r{seed}"),
                                             "--seed", str(seed), "--epochs", "1"))
    before = snapshot(tmp_path / "r1")
    rows, md = report.main(["--compare", str(tmp_path / "r1"), str(tmp_path / "r2"), "--resamples", "500",
                            "--out", str(tmp_path / "cmp")])
    logged = [json.loads(l) for l in (tmp_path / "r1" / "multitask-log.jsonl").read_text().splitlines()][-1]["dev"]
    assert [r.task for r in rows] == ["sst", "quora", "sts", "mean"]
    assert [r.a for r in rows[:3]] == [f"{logged[t]:.3f}" for t in ("sst", "quora", "sts")]
    assert all(r.verdict for r in rows) and md == tmp_path / "cmp" / "comparison.md"
    assert snapshot(tmp_path / "r1") == before
    with pytest.raises(MinbertError, match=r"--baseline and --candidate name one run each"):
        report.main(["--compare", "--baseline", str(tmp_path / "r1"), "--candidate", str(tmp_path / "r2")])


def test_report_results_of_a_folder_says_it_is_one(tmp_path):
    with pytest.raises(MinbertError, match=rf"^--results {re.escape(str(tmp_path))}: is a folder; give the results "
                                           r"table \(CSV\) itself"):
        report.main(["--results", str(tmp_path)])


def test_a_report_edited_by_hand_is_refused_naming_only_the_flags_typed(tmp_path, monkeypatch, capsys):
    """report.py RUN twice, its report.md edited in between: the refusal says the file changed since report.py
    wrote it and offers --out DIR and --backup, naming no --out the command did not have; with --out typed, --out
    names the file; each way out the line offers then works. A file of the user's in the default --results folder
    likewise."""
    from pathlib import Path
    monkeypatch.chdir(tmp_path)
    make_multitask_run(tmp_path / "runs" / "tiny")
    report.main(["runs/tiny"])
    md = Path("reports/tiny/report.md")
    md.write_text(md.read_text() + "my note\n")
    with pytest.raises(MinbertError) as refused:
        report.main(["runs/tiny"])
    assert str(refused.value) == ("reports/tiny/report.md: was changed since report.py wrote it, and the changes "
                                  "would be lost: move it or write elsewhere with --out DIR, or add --backup to keep "
                                  "it as report.md.DATE.bak")
    with pytest.raises(MinbertError, match=r"^--out reports/tiny/report.md: was changed since report.py wrote it, .*: "
                                           r"move it or name another path, or add --backup"):
        report.main(["runs/tiny", "--out", "reports/tiny"])
    assert md.read_text().endswith("my note\n")
    report.main(["runs/tiny", "--out", "reports/elsewhere"])
    report.main(["runs/tiny", "--backup"])
    assert [p.read_text()[-8:] for p in md.parent.glob("report.md.*.bak")] == ["my note\n"]
    table = tmp_path / "results.csv"
    table.write_text("run,mean\na,0.5\n")
    Path("reports/results").mkdir()
    Path("reports/results/results.png").write_bytes(b"my own figure")
    with pytest.raises(MinbertError, match=r"^reports/results/results.png: holds a file this project did not write .*: "
                                           r"move it or write elsewhere with --out DIR, or add --backup"):
        report.main(["--results", str(table)])
