"""Run a plan of measurement commands N at a time (how the tables of RESULTS.md were produced).

    python tools/parallel.py PLAN --jobs 6 --logs DIR [--deadline SECONDS] [--set KEY=VALUE ...]

PLAN holds one run per line, `NAME  command line` (blank lines and # comments skipped); `{KEY}` in a
command is replaced by --set values. Each run's output goes to DIR/NAME.log. Runs that have not started
when the deadline passes are skipped and named; a run still going at the deadline is stopped, so a
command-time limit never loses the logs of the runs that finished. Meant for one GPU, where several
small-model runs share the card: CPU timings taken this way are contended and do not count.
"""
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

if not __package__:  # run as a file (python tools/NAME.py): the project folder first, not tools/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from minbert.cli import MinbertError, Parser, main_guard  # noqa: E402  (first: its Ctrl-C line while the rest load)
from minbert.files import read_text, text_lines  # noqa: E402
from minbert.flags.types import positive_float, positive_int  # noqa: E402
from minbert.runs.outputs import check_file  # noqa: E402
from minbert.runs.sources import record  # noqa: E402


def read_plan(path, values):
    if not Path(path).is_file():
        raise MinbertError(f"{path}: " + ("is a folder; give the plan file" if Path(path).is_dir()
                                          else "plan file not found"))
    runs, lines = [], {}
    for n, line in enumerate(text_lines(read_text(path, "plan file")), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, cmd = line.partition(" ")
        if "/" in name or "\\" in name or name.startswith("."):  # its log is --logs/NAME.log, and nowhere else
            raise MinbertError(f"{path}, line {n}: run name {name!r}: give a plain name (no '/', not starting "
                               "with '.'): its output goes to NAME.log in --logs")
        if not cmd.strip():
            raise MinbertError(f"{path}, line {n}: run {name} has no command (each line NAME COMMAND)")
        if name in lines:  # both would write NAME.log
            raise MinbertError(f"{path}, line {n}: the run name {name} is on line {lines[name]} already; "
                               "each run's output goes to NAME.log, so give each run its own name")
        lines[name] = n
        try:
            cmd = cmd.strip().format(**values)
        except KeyError as e:
            raise MinbertError(f"{path}, line {n}: {e} is not given by --set") from None
        try:  # each run's program found before any starts: not a traceback once others run
            program = shlex.split(cmd)[0]
        except ValueError as e:
            raise MinbertError(f"{path}, line {n}: {e} (quote the command as a shell would)") from None
        if shutil.which(program) is None:
            raise MinbertError(f"{path}, line {n}: run {name}'s program {program!r} is not found (each line NAME "
                               "COMMAND: the first word names the run, the second its program)")
        runs.append((name, cmd))
    if not runs:
        raise MinbertError(f"{path}: no run in this plan (each line NAME COMMAND; blank lines and # comments "
                           "are skipped)")
    return runs


def parse_set(items):
    """--set's KEY=VALUE items as {KEY: VALUE}."""
    values = {}
    for kv in items:
        key, eq, value = kv.partition("=")
        if not key or not eq:
            raise MinbertError(f"--set {kv}: expected KEY=VALUE, e.g. --set py=python out=results")
        if key in values:  # a dict would keep the last and drop the first without a word
            raise MinbertError(f"--set {key}={values[key]} and {kv}: the key {key} given twice; give it once")
        values[key] = value
    return values


def main(argv=None):
    ap = Parser(prog="tools/parallel.py", description=__doc__)
    ap.add_argument("plan")
    ap.add_argument("--jobs", type=positive_int, default=4, help="runs at a time")
    ap.add_argument("--logs", required=True, help="the folder of the runs' logs, NAME.log each")
    ap.add_argument("--deadline", type=positive_float, default=None, help="seconds from start")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)
    values = parse_set(args.set)
    todo, logs = read_plan(args.plan, values), Path(args.logs)
    for name, _ in todo:  # a log this tool did not write (a user's file) is never replaced
        check_file(logs / f"{name}.log", "--logs")
    logs.mkdir(parents=True, exist_ok=True)
    running, names = {}, [name for name, _ in todo]
    try:
        ended = run_plan(todo, running, logs, args.jobs, args.deadline)
    # the runs going are stopped, and their logs kept as this tool's, for the next start
    except KeyboardInterrupt:
        for name, (p, fp, _) in running.items():
            p.terminate()
            p.wait()
            fp.close()
            record([logs / f"{name}.log"], "tools/parallel.py", "")
            print(f"stopped {name}: interrupted (its log is {logs / f'{name}.log'})", flush=True)
        raise
    failed = [f"{name} ({ended[name]})" for name in names if ended[name] != "rc=0"]
    if failed:  # the exit status says so too, for a script that runs the plan
        raise MinbertError(f"{len(failed)} of the plan's {len(names)} runs did not end with exit code 0: "
                           f"{', '.join(failed[:5])}{', ...' if len(failed) > 5 else ''}; their logs are in {logs}")
    return ended


def run_plan(todo, running, logs, jobs, deadline):
    """Run the plan's (name, command) pairs `todo`, `jobs` at a time, into `logs`; `running` holds those going.
    Returns {name: how it ended}: "rc=N", or "skipped" or "stopped" at the deadline."""
    t0, ended, stopped = time.time(), {}, set()
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    while todo or running:
        late = deadline is not None and time.time() - t0 > deadline
        while todo and len(running) < jobs and not late:
            name, cmd = todo.pop(0)
            fp = open(logs / f"{name}.log", "w")
            fp.write(f"$ {cmd}\n")
            fp.flush()
            running[name] = (subprocess.Popen(shlex.split(cmd), stdout=fp, stderr=subprocess.STDOUT, env=env),
                             fp, time.time())
            print(f"[{time.time() - t0:6.0f}s] start {name}", flush=True)
        if late:
            for name, _ in todo:
                ended[name] = "skipped"
                print(f"skipped {name}: deadline", flush=True)
            todo = []
            for name, (p, fp, _) in running.items():
                if name not in stopped:  # once: a killed run stays in `running` until it is reaped below
                    p.kill()
                    stopped.add(name)
                    print(f"stopped {name}: deadline", flush=True)
        for name, (p, fp, start) in list(running.items()):
            if p.poll() is not None:
                fp.close()
                # so that running the plan again may replace it
                record([logs / f"{name}.log"], "tools/parallel.py", "")
                tail = (logs / f"{name}.log").read_text().strip().splitlines()[-1:] or [""]
                print(f"[{time.time() - t0:6.0f}s] done {name} rc={p.returncode} in "
                      f"{time.time() - start:.0f}s: {tail[0][:300]}", flush=True)
                ended[name] = "stopped" if name in stopped else f"rc={p.returncode}"
                del running[name]
        if todo or running:
            time.sleep(1)
    return ended


if __name__ == "__main__":
    main_guard(main)
