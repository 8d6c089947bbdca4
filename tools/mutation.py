"""Mutation testing: one-line bugs put into the code one at a time, each run against the tests around it. A bug
the tests let through (a survivor) is a behaviour no test checks.

    python tools/mutation.py tools/mutants.txt --out mutation.csv [--jobs 2] [--only 1-10,14]

Each line of the mutants file is PATH<TAB>OLD<TAB>NEW<TAB>WHY[<TAB>TESTS]: in PATH (relative to the project) the
text OLD, which must occur exactly once there, becomes NEW. The tests run are TESTS (space-separated paths) or
else the ones mirroring PATH (tests/ mirrors the tree: minbert/reports/compare.py -> tests/minbert/reports/,
minbert/hub.py -> tests/minbert/test_hub.py, evaluation.py -> tests/test_evaluation.py, gpt2/generation.py ->
tests/gpt2/test_generation.py). The mutant is killed when a test fails or the run passes its --timeout, survived
when every test passes, and gone when OLD is no longer in PATH (the code changed since the line was written).
Each set of tests is first run once on the code as it is: where it fails there, a failure under a mutant proves
nothing, and the mutant's row is an error saying so, not a kill. Each job works in a scratch copy of the
project (the files git tracks or would add, and links to the files of data/), so the project itself is never
changed; one line per mutant goes to the terminal and to --out (a CSV), as each ends.
"""
import argparse
import csv
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as `python tools/mutation.py`
    sys.path.insert(0, str(ROOT))

# first, before torch loads: a Ctrl-C meanwhile is one line (minbert/cli.py)
from minbert.cli import MinbertError, Parser, main_guard  # noqa: E402

from minbert.flags.types import positive_int  # noqa: E402
from minbert.runs.outputs import check_file  # noqa: E402
from minbert.runs.publishing import write_output  # noqa: E402


def read_mutants(path):
    """[(number, path, old, new, why, tests)] of the file, each checked against the code: OLD once in PATH."""
    if not Path(path).is_file():
        raise MinbertError(f"{path}: no such mutants file")
    mutants = []
    for n, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split("\t")
        if len(fields) not in (4, 5):
            sys.exit(f"{path}, line {n}: {len(fields)} tab-separated fields, not PATH OLD NEW WHY [TESTS]")
        file, old, new, why = fields[:4]
        text = (ROOT / file).read_text() if (ROOT / file).is_file() else None
        tests = fields[4].split() if len(fields) == 5 else mirrored_tests(file)
        if text is None or text.count(old) != 1:  # the code changed since the line was written: said, not run
            print(f"{path}, line {n}: {old!r} is not exactly once in {file}: left out", file=sys.stderr)
            tests = None
        mutants.append((n, file, old, new, why, tests))
    return mutants


def mirrored_tests(file):
    p = Path(file)
    if p.parent.parts[:1] == ("minbert",) and len(p.parts) > 2:
        return [str(Path("tests") / p.parent)]
    return [str(Path("tests") / p.parent / f"test_{p.name}")]


def scratch_copy(folder):
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.splitlines()
    for f in files:
        if (ROOT / f).is_file():
            (folder / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / f, folder / f)
    for f in (ROOT / "data").glob("*"):  # the course files setup.sh put there (git ignores them)
        if f.is_file() and not (folder / "data" / f.name).exists():
            (folder / "data").mkdir(exist_ok=True)
            (folder / "data" / f.name).symlink_to(f)
    return folder


def run_tests(folder, tests, timeout):
    """(status, detail) of `tests` run in `folder`: survived (all pass), killed (one fails, or the run passes
    `timeout`), or error (pytest could not run)."""
    try:
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests],
                             cwd=folder, capture_output=True, text=True, timeout=timeout,
                             env={**os.environ, "OMP_NUM_THREADS": "1"})
    except subprocess.TimeoutExpired:
        return "killed", f"timeout after {timeout} s"
    failed = re.findall(r"^(?:FAILED|ERROR) (\S+)", out.stdout, re.M)
    if out.returncode == 0:
        return "survived", ""
    if out.returncode == 1 or failed:
        return "killed", failed[0] if failed else "a test failed"
    # pytest could not run (a collection error, a crash): its last line says why
    return "error", out.stdout.strip().splitlines()[-1][:200] if out.stdout.strip() else str(out.returncode)


def run_one(folder, mutant, timeout, baseline=None):
    """One mutant's row. `baseline(tests)` says whether those tests pass on the code as it is: where they fail
    without the mutant, a failure with it proves nothing, and the row says so (status "error")."""
    n, file, old, new, why, tests = mutant
    if tests is None:
        return {"n": n, "path": file, "why": why, "status": "gone", "seconds": "0",
                "detail": "the code it mutates changed", "tests": ""}
    t0 = time.perf_counter()
    broken = baseline(tests) if baseline is not None else ""
    if broken:
        return {"n": n, "path": file, "why": why, "status": "error", "seconds": f"{time.perf_counter() - t0:.0f}",
                "detail": f"the tests fail without the mutant: {broken}", "tests": " ".join(tests)}
    target = folder / file
    original = target.read_text()
    target.write_text(original.replace(old, new))
    try:
        status, detail = run_tests(folder, tests, timeout)
    finally:
        target.write_text(original)
    return {"n": n, "path": file, "why": why, "status": status, "seconds": f"{time.perf_counter() - t0:.0f}",
            "detail": detail, "tests": " ".join(tests)}


def parse_only(spec):
    """'1-10,14' -> {1, ..., 10, 14}: line numbers of the mutants file."""
    chosen = set()
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        if not (lo.isdigit() and (hi.isdigit() or not hi)) or int(hi or lo) < int(lo):
            raise argparse.ArgumentTypeError(f"{spec!r}: line numbers as 1-10,14 (each range low to high)")
        chosen.update(range(int(lo), int(hi or lo) + 1))
    return chosen


def main(argv=None):
    ap = Parser(prog="tools/mutation.py", description=__doc__)
    ap.add_argument("mutants", help="the mutants file")
    ap.add_argument("--out", required=True, help="the CSV written, one row per mutant as it ends")
    ap.add_argument("--jobs", type=positive_int, default=1, help="mutants run at once, each in its own scratch copy")
    ap.add_argument("--only", type=parse_only, default=None, help="line numbers of the mutants file, e.g. 1-10,14")
    ap.add_argument("--timeout", type=positive_int, default=600,
                    help="seconds a mutant's tests may take (then: killed)")
    args = ap.parse_args(argv)
    if Path(args.out).resolve() == Path(args.mutants).resolve():
        raise MinbertError(f"--out {args.out}: the mutants file itself, which writing the results would replace")
    if not Path(args.out).resolve().parent.is_dir():
        raise MinbertError(f"--out {args.out}: no folder {Path(args.out).parent} to write it in")
    # the rule for every output (docs/runs.md), before any mutant runs: a folder, a file the project did not
    # write (a user's notes, a course data file) or an input is one line
    check_file(args.out, "--out", inputs=[("the mutants file", args.mutants)])
    mutants = read_mutants(args.mutants)
    if args.only:
        mutants = [m for m in mutants if m[0] in args.only]
        if not mutants:
            raise MinbertError(f"--only: no mutant on those lines of {args.mutants}")
    todo, lock, rows = list(mutants), threading.Lock(), []
    passes = {}  # {tests: "" when they pass on the unmutated code, else what failed}: each set run once

    def baseline_in(folder):
        def baseline(tests):
            key = tuple(tests)
            with lock:
                if key in passes:
                    return passes[key]
            status, detail = run_tests(folder, tests, args.timeout)
            with lock:
                passes[key] = "" if status == "survived" else detail or status
                return passes[key]
        return baseline
    fields = ["n", "path", "why", "status", "seconds", "detail", "tests"]
    with open(args.out, "w", newline="") as fp:
        writer = csv.DictWriter(fp, fields)
        writer.writeheader()

        def worker():
            with tempfile.TemporaryDirectory(prefix="minbert-mutation-") as tmp:
                folder = scratch_copy(Path(tmp))
                while True:
                    with lock:
                        if not todo:
                            return
                        mutant = todo.pop(0)
                    row = run_one(folder, mutant, args.timeout, baseline_in(folder))
                    with lock:
                        rows.append(row)
                        writer.writerow(row)
                        fp.flush()
                        print(f"{len(rows)}/{len(mutants)} line {row['n']} {row['path']}: {row['status']} "
                              f"({row['seconds']} s) {row['why']} {row['detail']}", flush=True)
        threads = [threading.Thread(target=worker) for _ in range(args.jobs)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    # written as each mutant ended; now recorded as this tool's, so that the same command may replace it
    text = Path(args.out).read_text()
    write_output(args.out, lambda fp: fp.write(text), "tools/mutation.py", mode="w")
    killed = sum(r["status"] == "killed" for r in rows)
    print(f"{killed} of {len(rows)} killed; survived: "
          + ", ".join(str(r["n"]) for r in sorted(rows, key=lambda r: r["n"]) if r["status"] == "survived"))


if __name__ == "__main__":
    main_guard(main)
