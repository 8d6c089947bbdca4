"""The course's data files: `python datasets.py --fetch [--from DIR]` fills data/ from a local folder (or
$MINBERT_DATA), else downloads the twelve CSVs at a pinned commit of the course repository and checks each one
against its git blob id."""
import os
import shutil
from pathlib import Path

from minbert.files import git_blob_id
from minbert.hub import DownloadError, download
from utils import MinbertError

COURSE_REPO = "amahankali10/CS224N-Spring2024-DFP-Student-Handout"
COURSE_COMMIT = "3f64c60c8a0e40a9fe581235b08f4607ff187077"
# git blob ids of the course's files at that commit (Spring 2024 release).
BLOB_IDS = {
    "ids-cfimdb-dev.csv": "8a0f5dcf3d40189b96c801a12cd79bf8003e61de",
    "ids-cfimdb-test-student.csv": "1e789c709b3ca0511f027a309b6d8bd21cde41b2",
    "ids-cfimdb-train.csv": "cd57bcbd2f7214ea6dd1783d3e885d324b1f478d",
    "ids-sst-dev.csv": "3171aa629a340809d2db4a50df8f6e5ec9420ab0",
    "ids-sst-test-student.csv": "bbd2313758825f86e24416d6aad64cd93370cf7a",
    "ids-sst-train.csv": "9cb7333cb1dae49c2bd2a4b56a24882a6e8704b5",
    "quora-dev.csv": "97f9430a53b7f5544f857ff27a236c40bb42b5c7",
    "quora-test-student.csv": "a1b1e5ba3ef282ba1e9b169c509eb80dbbc68666",
    "quora-train.csv": "1f2e73b884113e629e2786001fb9cc8ae4a696c1",
    "sts-dev.csv": "9392860e584717976b8d817cc40c9e6ceeec27e0",
    "sts-test-student.csv": "25f0cf8fafdd1f82b9e2bb460c708af34341ce60",
    "sts-train.csv": "12b17760e7795fee35aeeabc290d5651de02622a",
}


def course_url(fname):
    base = os.environ.get("MINBERT_DATA_URL") or f"https://raw.githubusercontent.com/{COURSE_REPO}/{COURSE_COMMIT}/data"
    return f"{base.rstrip('/')}/{fname}"


def fetch_data(dest="data", source=None, log=print):
    """Fill `dest` with the twelve course files: copied from `source` when given, else downloaded.

    A file already in `dest` with the right blob id is left alone. A local copy that differs from
    the course release is used as it is, with one line saying so; a download must match.
    """
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    fetched = 0
    for fname, blob in BLOB_IDS.items():
        target = dest / fname
        if source is not None:
            src = Path(source) / fname
            if not src.is_file():
                raise MinbertError(f"{src}: data file not found in {source}")
            if not target.is_file() or target.read_bytes() != src.read_bytes():
                shutil.copyfile(src, target)
                fetched += 1
            if git_blob_id(target) != blob:
                log(f"{target}: differs from the course release (git blob id), used as it is")
            continue
        if target.is_file() and git_blob_id(target) == blob:
            continue
        tmp = dest / (fname + ".download")
        download(course_url(fname), tmp, desc=fname)
        if git_blob_id(tmp) != blob:
            got = git_blob_id(tmp)
            tmp.unlink()
            raise DownloadError(f"{course_url(fname)}: git blob id {got} but the course release has {blob}; not installed")
        os.replace(tmp, target)
        fetched += 1
    log(f"data/: {len(BLOB_IDS)} course files in {dest.resolve()} ({fetched} fetched now)")
    return dest
