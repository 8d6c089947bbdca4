"""Build GPT-2's data: the sonnet files beside the course CSVs in the project's data/ (the GPT-2
scripts' default paths are ../data/...). The Quora, SST and CFIMDB files are the minBERT
project's (datasets.py --fetch).

    python gpt2/datasets.py --fetch [--from DIR]     # setup.sh runs it after the CSVs

Each file is copied from --from (default $MINBERT_DATA) or downloaded from the GPT-2 course repository and
checked against its git blob id. A file already there with other contents is never replaced. Every problem is
one line, and none stops the set-up of the minBERT project: the sonnets are only needed by Build GPT-2."""
import os
import sys
from pathlib import Path

# Run as a script, Python puts this folder first on the path, where config.py and utils.py would shadow the
# shared ones: the project folder takes its place.
if Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from minbert.cli import MinbertError, Parser, main_guard  # noqa: E402
from minbert.course_files import SONNET_BLOB_IDS, check_fetch_flags, fetch_data  # noqa: E402

GPT2_REPO = "cfifty/public_cs224n_gpt"


def sonnet_url(fname):
    base = (os.environ.get("MINBERT_GPT2_DATA_URL")
            or f"https://raw.githubusercontent.com/{GPT2_REPO}/main/data")
    return f"{base.rstrip('/')}/{fname}"


def fetch_sonnets(dest, source=None, log=print):
    """Put the four sonnet files into `dest` (the course CSVs' fetch, not strict: a problem is a line, that
    file is skipped); returns how many were fetched now."""
    return fetch_data(dest, source, log, SONNET_BLOB_IDS, sonnet_url, strict=False, what="sonnet files")


def build_parser():
    ap = Parser(prog="gpt2/datasets.py", description="Fill data/ with Build GPT-2's sonnet files.")
    ap.add_argument("--fetch", action="store_true", help="copy or download the sonnet files into --dest")
    # The environment and the project folder are read in main(), so that the parser (and docs/flags.md)
    # is the same on every machine.
    ap.add_argument("--from", dest="source", default=None,
                    help="a local folder holding them (default: $MINBERT_DATA, else download)")
    ap.add_argument("--dest", default=None, help="default: the project's data/ (beside gpt2/)")
    return ap


def main(argv=None):
    ap = build_parser()
    args = ap.parse_args(argv)
    check_fetch_flags(args.fetch, args.source, args.dest, "gpt2/datasets.py")
    if not args.fetch:
        ap.print_help()
        return None
    dest = args.dest or str(Path(__file__).resolve().parents[1] / "data")
    fetched = fetch_sonnets(dest, args.source or os.environ.get("MINBERT_DATA") or None)
    if not any((Path(dest) / name).is_file() for name in SONNET_BLOB_IDS):  # a problem per file is said above
        raise MinbertError(f"--dest {dest}: none of the {len(SONNET_BLOB_IDS)} sonnet files is there after the "
                           "fetch (each problem is named above)")
    return fetched


if __name__ == "__main__":
    main_guard(main)
