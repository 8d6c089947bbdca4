"""safe_load.py: a torch whose restricted loader can run code opens nothing; a file holding Python objects is
refused in one line, nothing of it run; a file torch.save did not write is one line."""
import pytest
import torch

from minbert import safe_load
from minbert.runs.checkpoint import load_checkpoint
from utils import MinbertError


def test_a_torch_whose_restricted_loader_can_run_code_loads_nothing(tmp_path, monkeypatch):
    """Before torch 2.6, weights_only=True could be bypassed (CVE-2025-32434): such a torch never opens the file."""

    path = tmp_path / "ck.pt"
    torch.save({"w": torch.zeros(2)}, path)
    opened = []
    monkeypatch.setattr(safe_load.torch, "load", lambda *a, **kw: opened.append(a))
    monkeypatch.setattr(safe_load.torch, "__version__", "2.5.1+cu121")
    with pytest.raises(MinbertError, match=r"ck.pt: not loaded: torch 2.5.1\+cu121 can be made to run code .* install torch>=2.6"):
        load_checkpoint(path)
    assert opened == []
    assert safe_load.torch_release("2.13.0+cpu") == (2, 13) and safe_load.torch_release("2.6.0") >= safe_load.SAFE_LOADER_TORCH


class Payload:
    """A class a file may name: unpickling it would build (run) it."""
    ran = False

    def __reduce__(self):
        return (Payload._run, ())

    @staticmethod
    def _run():
        Payload.ran = True
        return Payload()


def test_a_file_holding_python_objects_is_refused_and_nothing_of_it_runs(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"w": torch.zeros(2), "x": Payload()}, path)
    Payload.ran = False
    obj, culprit = safe_load.safe_load(path)
    assert obj is None and culprit and not Payload.ran  # the global it would have called, never called
    assert "nothing in it was run" in str(safe_load.refuse_code(path, culprit))


@pytest.mark.parametrize("content, said", [(b"just text", r"not a file torch.save wrote: it begins b'just tex'"),
                                           (b"PK\x03\x04broken", r"cannot read checkpoint \(")])
def test_a_file_torch_save_did_not_write_is_one_line(tmp_path, content, said):
    path = tmp_path / "x.pt"
    path.write_bytes(content)
    with pytest.raises(MinbertError, match=said):
        safe_load.safe_load(path)


def test_a_truncated_checkpoint_is_said_to_be_and_torchs_long_text_is_cut_at_a_sentence(tmp_path, monkeypatch):
    """A file cut off (its zip directory gone) is named as such (torch had said "Invalid argument"); torch's text
    for another damage runs on for 300 characters: the line keeps its sentences that fit in 200, never half of
    one."""
    import io
    buffer = io.BytesIO()
    torch.save({"w": torch.zeros(100)}, buffer)
    path = tmp_path / "cut.pt"
    path.write_bytes(buffer.getvalue()[:300])
    with pytest.raises(MinbertError, match=r"cut.pt: cannot read checkpoint \(cut short or damaged: "):
        safe_load.safe_load(path)
    path.write_bytes(buffer.getvalue())
    long = "The file could not be read. " * 6 + "Load it with weights_only=False if you trust it."

    def damaged(*args, **kwargs):
        raise RuntimeError(long)
    monkeypatch.setattr(torch, "load", damaged)
    with pytest.raises(MinbertError) as e:
        safe_load.safe_load(path)
    detail = str(e.value).split("cannot read checkpoint (", 1)[1].split(")", 1)[0]
    assert len(detail) <= 230 and detail.endswith((".", "…")) and "weights_only" not in detail, detail
