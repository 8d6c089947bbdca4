"""Zip Build GPT-2's code and predictions for Gradescope (handout section 6, "Submission Instructions"):
cs224n_default_final_project_submission.zip in the project folder, holding the code (the top-level files,
minbert/ and gpt2/: unzipped into an empty folder, the GPT-2 scripts run) and gpt2/predictions/, after
checking that the files the handout lists are there and hold every id of their split (gpt2/submission.py).

    cd gpt2 && python prepare_submit.py [--part 1|2]
"""
import sys
from pathlib import Path

# Run as a script, Python puts this folder first on the path, where config.py and utils.py would shadow the
# shared ones: the project folder takes its place.
if Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

# first, before torch loads: a Ctrl-C meanwhile is one line (minbert/cli.py)
from minbert.cli import Parser, main_guard  # noqa: E402

from gpt2.submission import GPT2  # noqa: E402
from minbert.flags.groups import add_zip_flags  # noqa: E402
from minbert.submit import build, check_root  # noqa: E402


def build_parser():
    ap = Parser(prog="prepare_submit.py", description=__doc__)
    ap.add_argument("--part", choices=["auto", "1", "2"], default="auto",
                    help="which part's files must be there (auto: whichever part has predictions)")
    # The default is resolved in main(), so that the parser (and docs/flags.md) is the same in every clone.
    ap.add_argument("--root", default=None, help="the project folder to zip (default: the one gpt2/ is in)")
    ap.add_argument("--data_dir", default=None, help="the course files the predictions are checked against "
                                                     "(default: ROOT/data)")
    add_zip_flags(ap)
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    root = args.root or str(Path(__file__).resolve().parents[1])
    check_root(root)
    return build(root, args.part, data_dir=args.data_dir, project=GPT2, backup=args.backup, mixed=args.mixed,
                 runs=args.publish)


if __name__ == "__main__":
    main_guard(main)
