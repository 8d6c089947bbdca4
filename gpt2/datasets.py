"""Build GPT-2's data: the sonnet files beside the course CSVs in the project's data/ (the GPT-2 scripts' default
paths are ../data/...). The Quora, SST and CFIMDB files are the minBERT project's (datasets.py --fetch).

    python gpt2/datasets.py --fetch [--from DIR]     # setup.sh runs it after the CSVs

Each file is copied from --from (default $MINBERT_DATA) or downloaded from the GPT-2 course repository and
checked against its git blob id. A file already there with other contents is never replaced. Every problem is
one line, and none stops the set-up of the minBERT project: the sonnets are only needed by Build GPT-2."""
import os
import shutil
import sys
from pathlib import Path

# Run as a script, Python puts this folder first on the path, where config.py and utils.py would shadow the
# shared ones: the project folder takes its place.
if Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from minbert.files import git_blob_id  # noqa: E402
from minbert.hub import DownloadError, download  # noqa: E402
from utils import Parser, main_guard  # noqa: E402

GPT2_REPO = "cfifty/public_cs224n_gpt"
# git hash-object of the sonnet files as the GPT-2 project distributes them (the copies checked here)
SONNET_BLOB_IDS = {
    "sonnets.txt": "66bffc291ace4660043b9aaeb21ddd5af6638f13",
    "sonnets_held_out.txt": "802fcca369fbce749e1a9d0d8f61c3e2fa8a9118",
    "sonnets_held_out_dev.txt": "be351ef6b0ea29a0095010809cf3f0ac4fafbd0d",
    "TRUE_sonnets_held_out_dev.txt": "a68bd172ce56e3afdda72008dcf07a47b8e87e70",
}


def sonnet_url(fname):
    base = os.environ.get("MINBERT_GPT2_DATA_URL") or f"https://raw.githubusercontent.com/{GPT2_REPO}/main/data"
    return f"{base.rstrip('/')}/{fname}"


def fetch_sonnets(dest, source=None, log=print):
    """Put the four sonnet files into `dest`; returns how many were fetched now (problems are logged lines)."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    fetched = 0
    for fname, blob in SONNET_BLOB_IDS.items():
        target, src = dest / fname, Path(source) / fname if source else None
        if target.is_file():
            if git_blob_id(target) != blob and not (src and src.is_file() and src.read_bytes() == target.read_bytes()):
                log(f"{target}: already there with other contents, kept as it is (move it away to fetch the course's)")
            continue
        if src is not None:
            if not src.is_file():
                log(f"{src}: not found, so {fname} was not copied (Build GPT-2 needs it; minBERT does not)")
                continue
            shutil.copyfile(src, target)
        else:
            tmp = dest / (fname + ".download")
            try:
                download(sonnet_url(fname), tmp, desc=fname)
            except DownloadError as e:
                log(f"{fname}: not fetched ({e}); copy it with python gpt2/datasets.py --fetch --from DIR")
                continue
            if git_blob_id(tmp) != blob:
                log(f"{sonnet_url(fname)}: git blob id {git_blob_id(tmp)}, not the GPT-2 project's {blob}; not installed")
                tmp.unlink()
                continue
            os.replace(tmp, target)
        fetched += 1
    log(f"data/: the sonnet files in {dest.resolve()} ({fetched} fetched now)")
    return fetched


def main(argv=None):
    ap = Parser(prog="gpt2/datasets.py", description="Fill data/ with Build GPT-2's sonnet files.")
    ap.add_argument("--fetch", action="store_true", help="copy or download the sonnet files into --dest")
    ap.add_argument("--from", dest="source", default=None,
                    help="a local folder holding them (default: $MINBERT_DATA, else download)")
    ap.add_argument("--dest", default=str(Path(__file__).resolve().parents[1] / "data"), help="default: the project's data/")
    args = ap.parse_args(argv)
    if not args.fetch:
        ap.print_help()
        return None
    return fetch_sonnets(args.dest, args.source or os.environ.get("MINBERT_DATA") or None)


if __name__ == "__main__":
    main_guard(main)
