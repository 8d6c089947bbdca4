"""A pipeline script that trains nothing, for the sweep's tests: run by a sweep in place of classifier.py or
multitask_classifier.py (tests.processes.STUB_TRIAL), it logs one dev score per --epochs into its --run_dir as
the pipelines do (STUB-log.jsonl, with the argv it was given) and exits, in a few hundredths of a second: no
torch, no model.

Its score is a fixed function of --lr, --seed and the epoch, so that trials differ. With the environment's
MINBERT_TEST_HOLD_TRIAL=N, trial N's process (run folder tN-s...) stops itself (SIGSTOP) right after logging its
first epoch: a test then finds it mid-run whatever the machine's load, and lets it go on with SIGCONT."""
import json
import os
import signal
import sys
from pathlib import Path


def flag(argv, name, default):
    return argv[argv.index(name) + 1] if name in argv else default


def main(argv):
    folder = Path(flag(argv, "--run_dir", None))
    folder.mkdir(parents=True)
    lr, seed, epochs = float(flag(argv, "--lr", "1e-3")), int(flag(argv, "--seed", "0")), int(flag(argv, "--epochs", "1"))
    hold = os.environ.get("MINBERT_TEST_HOLD_TRIAL")
    for epoch in range(epochs):
        score = 0.5 + 0.1 * epoch + (1000 * lr) % 0.1 + seed % 7 / 1000
        with open(folder / "STUB-log.jsonl", "a") as fp:
            fp.write(json.dumps({"epoch": epoch, "dev_score": score, "argv": argv}) + "\n")
        if epoch == 0 and hold is not None and folder.name.startswith(f"t{hold}-"):
            os.kill(os.getpid(), signal.SIGSTOP)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
