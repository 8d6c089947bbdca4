"""Zip the code and predictions for Gradescope: cs224n_default_final_project_submission.zip holds every
top-level *.py file, the minbert/ package the scripts import, and the prediction files the handout lists
for the part submitted, nothing else (unzipped into an empty folder, the code runs); one line names what
else is in predictions/, left out. Refuses, naming them, if required prediction files are missing or empty,
or if a file's ids are not exactly those of the split it belongs to (a run on a subset of the data, or
another split's file under this name). A zip of that name that this project did not write is never
replaced: one line, or --backup.

    python prepare_submit.py            # Part 1 and/or Part 2, whichever predictions are there
    python prepare_submit.py --part 1   # insist on the eight Part 1 files
"""
from pathlib import Path

from minbert.flags.groups import add_zip_flags
from minbert.submit import PART1, PART2, ZIP_NAME, build, check_root, problems_with, split_of
from utils import Parser, main_guard

__all__ = ["PART1", "PART2", "ZIP_NAME", "build", "problems_with", "split_of", "main"]


def build_parser():
    ap = Parser(prog="prepare_submit.py", description=__doc__)
    ap.add_argument("--part", choices=["auto", "1", "2"], default="auto",
                    help="which part's files must be there (auto: whichever part has predictions)")
    ap.add_argument("--root", default=None, help="the project folder to zip (default: "
                                                 "where prepare_submit.py is)")
    ap.add_argument("--data_dir", default=None, help="the course CSVs the ids are "
                                                     "checked against (default: ROOT/data)")
    add_zip_flags(ap)
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.root:
        check_root(args.root)
    build(args.root or Path(__file__).resolve().parent, args.part, data_dir=args.data_dir, backup=args.backup,
          mixed=args.mixed, runs=args.publish)


if __name__ == "__main__":
    main_guard(main)
