"""Loading tensors without running code: `safe_load` is torch.load with weights_only=True, so a checkpoint
from a teammate or the internet holds weights and plain values, nothing that executes; `refuse_code` is the one
line for a file that would.
"""
import pickle
import re
import warnings
import zipfile

import torch

from minbert.cli import MinbertError


def _refused_global(message):
    """The 'module.name' torch's restricted unpickler refused, from its message (the wording changed
    between torch releases: 'Unsupported global: GLOBAL x.y', 'unsupported GLOBAL x.y whose module ...')."""
    m = re.search(r"[Uu]nsupported (?:global: )?GLOBAL ([\w.]+)", message)
    return m.group(1) if m else None


# torch's restricted (weights_only) unpickler could be made to run code from the file before
# 2.6 (CVE-2025-32434); with an older torch (setup.sh MINBERT_TORCH=skip keeps the one
# installed) nothing is loaded.
SAFE_LOADER_TORCH = (2, 6)


def torch_release(version=None):
    """(major, minor) of a torch version string ('2.13.0+cpu' -> (2, 13))."""
    m = re.match(r"(\d+)\.(\d+)", str(version or torch.__version__))
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def safe_load(path, what="checkpoint", map_location="cpu", allowed=(), advice=""):
    """torch.load(path, weights_only=True): tensors and plain values only, so loading runs no code of the
    file's. `allowed` are further classes the caller trusts (safe_globals). Returns (object, None), or
    (None, 'module.name') when the file holds a Python object outside `allowed`: the caller refuses it
    (refuse_code) or knows another reading. A damaged file is one line (`advice` appended); torch's own
    advice to load the file unrestricted never reaches the user. With a torch older than
    SAFE_LOADER_TORCH the file is not opened at all: that torch's restricted loader is not restricted."""
    if torch_release() < SAFE_LOADER_TORCH:
        raise MinbertError(f"{path}: not loaded: torch {torch.__version__} can be made to run code from a "
                           "file it loads, even with weights_only=True (CVE-2025-32434, fixed in torch "
                           "2.6); install torch>=2.6 (setup.sh installs 2.13.0)")
    try:
        with open(path, "rb") as fp:
            head = fp.read(8)
    except OSError:
        head = None  # torch.load says what is wrong below
    # torch.save writes a zip (PK...), or in its legacy format a pickle (\x80...): anything else is no such file,
    # which torch would report as a KeyError or an IndexError from the inside of its reader
    if head is not None and not (head.startswith(b"PK") or head.startswith(b"\x80")):
        raise MinbertError(f"{path}: cannot read {what} (not a file torch.save wrote: it begins {head!r})"
                           f"{advice}")
    try:
        # torch warns (several lines) about a pickle protocol its restricted loader does not read, then fails:
        # the failure is the one line below, the warning would only bury it.
        with torch.serialization.safe_globals(list(allowed)), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.load(path, map_location=map_location, weights_only=True), None
    except pickle.UnpicklingError as e:
        culprit = _refused_global(str(e))
        if culprit is None:
            raise MinbertError(f"{path}: cannot read {what} (damaged, "
                               f"or not a file torch.save wrote){advice}") from None
        return None, culprit
    except Exception as e:  # torch raises many kinds for a damaged file
        if head is not None and head.startswith(b"PK") and not zipfile.is_zipfile(path):
            # torch.save's zip keeps its directory at the end: without it, a copy or a write stopped part way
            raise MinbertError(f"{path}: cannot read {what} (cut short or damaged: the zip torch.save writes ends "
                               f"with its directory, which is missing; was the file copied or written only in "
                               f"part?)"
                               f"{advice}") from None
        lines = [l.strip() for l in str(e).splitlines() if l.strip()]
        detail = lines[0] if lines else "no detail"
        if len(detail) > 200:  # torch's text runs on with advice: its whole sentences that fit, not a cut word
            end = detail[:200].rfind(". ")
            detail = detail[:end + 1] if end > 0 else detail[:199] + "…"
        raise MinbertError(f"{path}: cannot read {what} ({type(e).__name__}: {detail}){advice}") from None


def refuse_code(path, culprit):
    """The one line for a file holding a Python object that loading would have to build (run)."""
    return MinbertError(f"{path}: refused: the file holds Python objects that loading would have to run "
                        f"({culprit}); nothing in it was run. Checkpoints and weights hold only tensors and "
                        "plain values, so this file is not one, or it was altered")
