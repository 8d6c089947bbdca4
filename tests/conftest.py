"""The suite's fixtures (one per thing): a tiny checkpoint, tiny course data, a local file server, a PostgreSQL
server of the test's own. What they build is in checkpoints.py, course.py, fileserver.py and processes.py."""
import os
from pathlib import Path

import pytest
import torch

from tests.checkpoints import make_gpt2_checkpoint, make_hf_checkpoint
from tests.course import write_course_data
from tests.fileserver import FileServer
from tests.processes import postgres_bin


def pytest_configure(config):
    # Under pytest-xdist (-n N) the N workers share the machine's cores: one torch thread each (and in the
    # processes a test starts), not one per core each, which would put N threads on every core.
    if os.environ.get("PYTEST_XDIST_WORKER"):
        torch.set_num_threads(1)
        os.environ["OMP_NUM_THREADS"] = "1"


@pytest.fixture
def hf_checkpoint(tmp_path):
    return make_hf_checkpoint(tmp_path / "tiny-bert")


@pytest.fixture
def tiny_gpt2(tmp_path):
    """A tiny GPT-2 in HF's layout, random weights saved by transformers, with its own BPE vocabulary; the folder."""
    return make_gpt2_checkpoint(tmp_path / "tiny-gpt2")


@pytest.fixture(scope="session")
def trained_part2(tmp_path_factory):
    """One tiny Part 2 run of one epoch (multitask_classifier.py's defaults otherwise), trained once per test
    run on course data and a tiny checkpoint of its own, which equal the course_data and tiny_model fixtures':
    `.checkpoint` (its run folder's mt.pt), `.predictions` (its six files and results table), `.data`, `.model`.
    Read it; a test that writes into its folders copies them first."""
    from types import SimpleNamespace
    import multitask_classifier
    from tests.course import part2_args
    root = tmp_path_factory.mktemp("trained-part2")
    data, (model, _) = write_course_data(root / "data"), make_hf_checkpoint(root / "tiny-bert")
    multitask_classifier.main(part2_args(root, data, model, "--epochs", "1"))
    return SimpleNamespace(root=root, data=data, model=model, checkpoint=root / "ck" / "mt.pt",
                           predictions=root / "pred")


@pytest.fixture
def file_server():
    s = FileServer()
    yield s
    s.close()


@pytest.fixture
def course_data(tmp_path):
    return write_course_data(tmp_path / "data")


@pytest.fixture
def tiny_model(hf_checkpoint):
    """The tiny checkpoint's folder (hf_checkpoint builds it; this is its path alone)."""
    return hf_checkpoint[0]


@pytest.fixture
def unwritable(tmp_path):
    """A folder in which no file can be made, by root too: immutable (chattr +i) where the file system and the
    process allow it, else mode 555 (which stops every user but root); skipped where neither stops a write."""
    import shutil
    import subprocess
    folder = tmp_path / "locked"
    folder.mkdir()
    immutable = shutil.which("chattr") and subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
    if not immutable:
        folder.chmod(0o555)
    try:
        try:
            (folder / "probe").touch()
        except OSError:
            yield folder
            return
        (folder / "probe").unlink()
        pytest.skip("no folder here refuses a write (root, without chattr +i)")
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], capture_output=True)
        folder.chmod(0o755)


@pytest.fixture
def unwritable_file(tmp_path):
    """A function making the file at a path (in a writable folder) one that cannot be written, by root too:
    immutable (chattr +i) where allowed, else mode 444 (which stops every user but root); the test is skipped
    where neither stops a write. Every file it locked is unlocked at the end."""
    import shutil
    import subprocess
    locked = []

    def lock(path):
        immutable = shutil.which("chattr") and subprocess.run(["chattr", "+i", str(path)],
                                                              capture_output=True).returncode == 0
        locked.append((path, immutable))
        if not immutable:
            path.chmod(0o444)
        try:
            open(path, "a").close()
        except OSError:
            return path
        pytest.skip("no file here refuses a write (root, without chattr +i)")
    yield lock
    for path, immutable in locked:
        if immutable:
            subprocess.run(["chattr", "-i", str(path)], capture_output=True)
        path.chmod(0o644)


# ----------------------------------------------------------------------------- a PostgreSQL server of the test's own

@pytest.fixture
def postgres_url():
    """A PostgreSQL server started for the test on 127.0.0.1 (Debian's postgresql package, which .ci/run
    installs), with an empty database; its URL. As root, the server runs as the postgres user."""
    import os
    import socket
    import subprocess
    initdb, pg_ctl = postgres_bin("initdb"), postgres_bin("pg_ctl")
    if not initdb or not pg_ctl:
        pytest.skip("PostgreSQL's server programs are not installed (apt-get install postgresql)")
    import shutil
    import tempfile
    folder = Path(tempfile.mkdtemp(prefix="minbert-pg-"))  # outside pytest's folders, which only their owner enters
    as_user = []
    if os.geteuid() == 0:  # the server refuses to run as root
        import pwd
        user = pwd.getpwnam("postgres")
        os.chown(folder, user.pw_uid, user.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    run = lambda *cmd: subprocess.run([*as_user, *cmd], check=True, capture_output=True, text=True)  # noqa: E731
    run(initdb, "-D", str(folder / "data"), "-U", "postgres", "--auth=trust")
    run(pg_ctl, "-D", str(folder / "data"), "-l", str(folder / "log"), "-w", "start", "-o",
        f"-p {port} -k {folder} -c listen_addresses=127.0.0.1")
    try:
        run(postgres_bin("createdb") or "createdb", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "minbert")
        yield f"postgresql://postgres@127.0.0.1:{port}/minbert"
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", str(folder / "data"), "-m", "immediate", "stop"], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)
