"""The course repository's files: where they come from (the pinned commit), their git blob ids, fetching them
into data/ checked against those ids (datasets.py --fetch, setup.sh), and the handout's two reference files
(sanity_check.data, optimizer_test.npy). Reading the CSVs is course_data.py's."""
import os
from pathlib import Path

from minbert.cli import MinbertError, set_interrupt_hint
from minbert.files import TEMPORARY, atomic_write, check_writable, git_blob_id
from minbert.hub import DownloadError, download
from minbert.project_paths import check_output, output_folder, run_folder_of

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
# git hash-object of Build GPT-2's sonnet files as its course repository distributes them (gpt2/datasets.py)
SONNET_BLOB_IDS = {
    "sonnets.txt": "66bffc291ace4660043b9aaeb21ddd5af6638f13",
    "sonnets_held_out.txt": "802fcca369fbce749e1a9d0d8f61c3e2fa8a9118",
    "sonnets_held_out_dev.txt": "be351ef6b0ea29a0095010809cf3f0ac4fafbd0d",
    "TRUE_sonnets_held_out_dev.txt": "a68bd172ce56e3afdda72008dcf07a47b8e87e70",
}
# The names of the course's data files: a file of one of these names is data, never an output
# (runs/outputs.py).
COURSE_FILES = frozenset(BLOB_IDS) | frozenset(SONNET_BLOB_IDS)


# The handout's two reference files, at the root of the course repository at that commit: bert-base-uncased's
# outputs on sanity_check.py's two inputs (a dict torch.save wrote) and the weights after optimizer_test.py's
# 1000 AdamW steps. --fetch puts them into data/ beside the CSVs, where the two checks look for them first.
REFERENCE_BLOB_IDS = {
    "optimizer_test.npy": "aca527c86a96a72196f4ee3014222400d8b2d259",
    "sanity_check.data": "e3dc1284bcb3fbf5e74412707cc168fd0f9bac05",
}
PROJECT = Path(__file__).resolve().parents[1]


def course_url(fname):
    base = (os.environ.get("MINBERT_DATA_URL")
            or f"https://raw.githubusercontent.com/{COURSE_REPO}/{COURSE_COMMIT}/data")
    return f"{base.rstrip('/')}/{fname}"


def reference_url(fname):
    """A reference file's address: the folder above the CSVs' (the course repository's root)."""
    return f"{course_url(fname).rsplit('/', 2)[0]}/{fname}"


def fetch_references(dest="data", source=None, log=print):
    """Put the course's sanity_check.data and optimizer_test.npy into `dest`, checked as the CSVs are; not
    strict: a problem is one line and the checks fall back on the project's own references. Returns how many
    were fetched now."""
    return fetch_data(dest, source, log, REFERENCE_BLOB_IDS, reference_url, strict=False,
                      what="course reference files")


def course_reference(name, data_dir=None):
    """The course's reference file `name` where --fetch puts it (the project's data/), and the words that say
    which file a check used: (path, words), or (None, words saying why there is none)."""
    path = Path(data_dir or PROJECT / "data") / name
    if not path.is_file():
        return None, f"the course's {name} is not in {path.parent}: python datasets.py --fetch puts it there"
    blob, course = git_blob_id(path), REFERENCE_BLOB_IDS[name]
    if blob != course:  # a copy of the user's: used as it is (as a differing local CSV is), and said so
        return path, f"{path}, not the course's {name} (git blob {blob[:10]}, the course's is {course[:10]})"
    return path, f"the course's {name}, {path} (git blob {blob[:10]})"


def check_fetch_flags(fetch, source, dest, command):
    """`command`'s --from `source` or --dest `dest` (None: not typed) without --fetch: it would change nothing,
    and printing the help with exit code 0 would hide that; one line instead."""
    idle = "--from" if source is not None else "--dest" if dest is not None else None
    if not fetch and idle:
        raise MinbertError(f"{idle} belongs to --fetch: as given it would change nothing; add --fetch "
                           f"(python {command} --fetch --from DIR)")


def fetch_data(dest="data", source=None, log=print, files=None, url=course_url, strict=True,
               what="course CSVs"):
    """Fill `dest` with `files` ({name: git blob id}; default the twelve course CSVs): copied from `source`
    when given, else downloaded from url(name). Returns how many were fetched now.

    A file already in `dest` with the right blob id (or, from `source`, the same bytes) is left alone; one
    that differs is never replaced. Strict (the course CSVs), every problem stops the fetch in one line, the
    differing files before anything is copied, so no folder is left half one set, half another; not strict
    (Build GPT-2's sonnets, which minBERT does not need), each problem is a line and that file is skipped. A
    local copy that differs from the course release is used as it is, with one line saying so; a download must
    match.
    """
    files = BLOB_IDS if files is None else files
    dest = Path(dest)
    if dest.exists() and not dest.is_dir():
        raise MinbertError(f"--dest {dest}: is a file, but the {what} go into a folder there")
    above = next((p for p in dest.parents if p.exists() and not p.is_dir()), None)
    if above is not None:
        raise MinbertError(f"--dest {dest}: {above} is a file, but the {what} go into a folder inside it; "
                           "give --dest another folder")
    if dest.is_symlink() and not dest.exists():  # mkdir would meet the link itself
        raise MinbertError(f"--dest {dest}: is a link to a missing folder, but the {what} go into a folder "
                           "there; make the folder it points to, or give --dest another folder")
    run = run_folder_of(dest)
    if run is not None:
        raise MinbertError(f"--dest {dest}: inside {run}, the folder of a run, whose files belong to its checkpoint "
                           f"and log: give --dest another folder")
    output = output_folder(dest)
    if output is not None:  # predictions/ is what prepare_submit.py zips; runs/, reports/ hold what commands wrote
        raise MinbertError(f"--dest {dest}: inside the project's {output}/, where commands write their outputs: "
                           "give --dest another folder (the default is data/)")
    if source is not None and not Path(source).is_dir():
        raise MinbertError(f"--from {source}: "
                           "" + (f"is a file; give the folder holding the {what}" if Path(source).exists()
                                                   else "folder not found"))

    def problem(error):
        if strict:
            raise error
        log(str(error))

    def differs(f, blob):
        there = Path(source) / f if source is not None else None
        if there is not None and there.is_file():
            return (dest / f).read_bytes() != there.read_bytes()
        return git_blob_id(dest / f) != blob
    differing = [f for f, blob in files.items() if (dest / f).is_file() and differs(f, blob)]
    if differing and strict:
        raise MinbertError(f"{dest / differing[0]}: already there and different from what --fetch would put "
                           f"there ({len(differing)} of the {len(files)} files differ); data is never "
                           "replaced: move those files away first, or give --dest another folder")
    for f in differing:
        log(f"{dest / f}: already there with other contents, "
            "kept as it is (move it away to fetch the course's)")
    if any(not (dest / f).is_file() for f in files):  # a complete folder may be read-only
        check_writable(dest, f"--dest {dest}")
    for f in files:  # each file to be put there: a regular file's place (not a link, a pipe, a device)
        if not (dest / f).is_file():
            check_output(dest / f, f"--dest {dest / f}", data=True)
    dest.mkdir(parents=True, exist_ok=True)
    for p in dest.iterdir():  # what a killed fetch left half written (.NAME.RANDOM.tmp of a file it copies)
        if TEMPORARY.match(p.name) and any(p.name.startswith(f".{f}.") for f in files) and p.is_file():
            p.unlink(missing_ok=True)
    fetched = 0

    def one_more():  # each file is written whole: a Ctrl-C leaves those before it, and none in part
        set_interrupt_hint(f"{fetched} of the {what} fetched into {dest} so far, each whole; the same command "
                           "fetches the rest")
    for fname, blob in files.items():
        target = dest / fname
        if fname in differing:
            continue
        if source is not None:
            src = Path(source) / fname
            if not src.is_file():
                problem(MinbertError(f"{src}: data file not found in {source}"))
                continue
            if not target.is_file():  # whole or not at all: half a file would be "different" next time
                atomic_write(target, lambda fp, src=src: fp.write(src.read_bytes()))
                fetched += 1
                one_more()
            if git_blob_id(target) != blob:
                log(f"{target}: differs from the course release (git blob id), used as it is")
            continue
        if target.is_file():  # with the right blob id (a differing one was named above)
            continue
        tmp = dest / (fname + ".download")
        try:
            download(url(fname), tmp, desc=fname)
        except DownloadError as e:
            # no network: the files may still be on this machine
            problem(e if not e.offline else DownloadError(
                f"{e}; without a network, copy the {what} from a folder that has them: MINBERT_DATA=DIR bash "
                "setup.sh (or --fetch --from DIR)", offline=True))
            continue
        if git_blob_id(tmp) != blob:
            got = git_blob_id(tmp)
            tmp.unlink()
            problem(DownloadError(f"{url(fname)}: git blob id {got} but the "
                                  f"course release has {blob}; not installed"))
            continue
        os.replace(tmp, target)
        fetched += 1
        one_more()
    there = sum((dest / f).is_file() for f in files)
    log(f"{dest}: {there} of the {len(files)} {what} there ({fetched} fetched now)")
    return fetched
