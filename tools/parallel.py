"""Run a plan of measurement commands N at a time (how the tables of RESULTS.md were produced).

    python tools/parallel.py PLAN --jobs 6 --logs DIR [--deadline SECONDS] [--set KEY=VALUE ...]

PLAN holds one run per line, `NAME  command line` (blank lines and # comments skipped); `{KEY}` in a
command is replaced by --set values. Each run's output goes to DIR/NAME.log. Runs that have not started
when the deadline passes are skipped and named; a run still going at the deadline is stopped, so a
command-time limit never loses the logs of the runs that finished. Meant for one GPU, where several
small-model runs share the card: CPU timings taken this way are contended and do not count.
"""
import argparse
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path


def read_plan(path, values):
    if not Path(path).is_file():
        sys.exit(f"error: {path}: " + ("is a folder; give the plan file" if Path(path).is_dir() else "plan file not found"))
    runs = []
    for n, line in enumerate(Path(path).read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, cmd = line.partition(" ")
        try:
            runs.append((name, cmd.strip().format(**values)))
        except KeyError as e:
            sys.exit(f"{path}, line {n}: {e} is not given by --set")
    return runs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("plan")
    ap.add_argument("--jobs", type=int, default=4)
    ap.add_argument("--logs", required=True)
    ap.add_argument("--deadline", type=float, default=None, help="seconds from start")
    ap.add_argument("--set", nargs="*", default=[], metavar="KEY=VALUE")
    args = ap.parse_args()
    values = dict(kv.split("=", 1) for kv in args.set)
    todo, logs = read_plan(args.plan, values), Path(args.logs)
    logs.mkdir(parents=True, exist_ok=True)
    t0, running = time.time(), {}
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "2")}
    while todo or running:
        late = args.deadline is not None and time.time() - t0 > args.deadline
        while todo and len(running) < args.jobs and not late:
            name, cmd = todo.pop(0)
            fp = open(logs / f"{name}.log", "w")
            fp.write(f"$ {cmd}\n")
            fp.flush()
            running[name] = (subprocess.Popen(shlex.split(cmd), stdout=fp, stderr=subprocess.STDOUT, env=env), fp,
                             time.time())
            print(f"[{time.time() - t0:6.0f}s] start {name}", flush=True)
        if late:
            for name, _ in todo:
                print(f"skipped {name}: deadline", flush=True)
            todo = []
            for name, (p, fp, _) in running.items():
                p.kill()
                print(f"stopped {name}: deadline", flush=True)
        for name, (p, fp, start) in list(running.items()):
            if p.poll() is not None:
                fp.close()
                tail = (logs / f"{name}.log").read_text().strip().splitlines()[-1:] or [""]
                print(f"[{time.time() - t0:6.0f}s] done {name} rc={p.returncode} in {time.time() - start:.0f}s: "
                      f"{tail[0][:300]}", flush=True)
                del running[name]
        time.sleep(1)


if __name__ == "__main__":
    main()
