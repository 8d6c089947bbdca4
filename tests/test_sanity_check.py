"""sanity_check.py: our BERT against an independent NumPy forward pass (which catches a wrong model), against a
saved reference in the course's format, against the course's own sanity_check.data by default for
bert-base-uncased (read without running code), and on the real MiniLM weights."""

import pytest
import torch

from minbert import course_files
from minbert.files import git_blob_id
from tests.checkpoints import make_hf_checkpoint, tiny_config
from tests.course import real_data_folder
from tests.processes import run_main
from utils import MinbertError


@pytest.fixture
def wide_vocab_checkpoint(tmp_path):
    """The tiny checkpoint with bert-base-uncased's vocabulary size (the handout's inputs use its ids)."""
    # the handout's example ids go up to 17953: a tiny model with a full-size vocabulary
    return make_hf_checkpoint(tmp_path / "tiny-bert", config=tiny_config(vocab_size=20000))


def _run(*args):
    return run_main("sanity_check.py", *args)


def test_passes_on_a_hub_layout_checkpoint(wide_vocab_checkpoint):
    folder, _ = wide_vocab_checkpoint
    out = _run("--pretrained", str(folder))
    assert out.returncode == 0, out.stderr
    assert "Your BERT implementation is correct!" in out.stdout


def test_a_vocabulary_too_small_for_the_handouts_sentences_is_one_line(tiny_model):
    out = _run("--pretrained", str(tiny_model))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert out.stderr.strip().startswith(f"error: --pretrained {tiny_model}: its vocabulary has ")
    assert "but the handout's check sentences hold token id 17953" in out.stderr


def test_numpy_reference_catches_a_wrong_model(wide_vocab_checkpoint, monkeypatch):
    """Break one thing in our model (ReLU for GELU in one layer); the independent NumPy pass must notice."""
    import sanity_check
    from bert import BertModel
    folder, _ = wide_vocab_checkpoint
    model = BertModel.from_pretrained(folder).eval()
    model.bert_layers[1].interm_af = torch.nn.ReLU()
    ids = torch.tensor(sanity_check.INPUT_IDS)
    mask = (ids != 0).long()
    with torch.no_grad():
        ours = {k: v.numpy() for k, v in model(ids, mask).items()}
    from base_bert import hf_to_ours, read_state_dict
    w = {hf_to_ours(k): v.double().numpy() for k, v in read_state_dict(folder / "model.safetensors").items()
         if hf_to_ours(k)}
    ref = sanity_check.numpy_bert(w, model.config, ids.numpy(), mask.numpy())
    problems = sanity_check.compare(ours, ref, mask.numpy())
    assert problems and problems[0].startswith("last_hidden_state")


def test_reference_file_in_course_format(wide_vocab_checkpoint, tmp_path):
    from bert import BertModel
    import sanity_check
    folder, _ = wide_vocab_checkpoint
    model = BertModel.from_pretrained(folder).eval()
    ids = torch.tensor(sanity_check.INPUT_IDS)
    with torch.no_grad():
        out = model(ids, (ids != 0).long())
    torch.save({k: v.clone() for k, v in out.items()}, tmp_path / "sanity_check.data")
    ok = _run("--pretrained", str(folder), "--reference", str(tmp_path / "sanity_check.data"))
    assert ok.returncode == 0 and "correct" in ok.stdout, ok.stderr
    out["pooler_output"][1, 3] += 0.01
    torch.save(out, tmp_path / "bad.data")
    bad = _run("--pretrained", str(folder), "--reference", str(tmp_path / "bad.data"))
    assert bad.returncode == 2
    assert "pooler_output: 1 of" in bad.stderr and "max |diff| 0.01" in bad.stderr
    assert "Traceback" not in bad.stderr
    # a file without the two outputs is named before any model is built (a hub name that cannot resolve here)
    torch.save({"hidden": out["last_hidden_state"]}, tmp_path / "other.data")
    other = _run("--pretrained", "no-such-org/no-such-model", "--reference", str(tmp_path / "other.data"))
    assert other.returncode == 2 and other.stderr.strip() == (
        f"error: --reference {tmp_path / 'other.data'}: lacks last_hidden_state and pooler_output (it holds hidden); "
        f"a reference is a dict of the two outputs")


def test_real_minilm_weights():
    out = _run("--pretrained", "all-minilm-l6-v2")
    assert out.returncode == 0, out.stderr
    assert "Your BERT implementation is correct!" in out.stdout


def _save_outputs(folder, path, nudge=0.0):
    """`folder`'s BERT outputs on the handout's inputs, saved as the course saves sanity_check.data."""
    from bert import BertModel
    import sanity_check
    ids = torch.tensor(sanity_check.INPUT_IDS)
    with torch.no_grad():
        out = BertModel.from_pretrained(folder).eval()(ids, (ids != 0).long())
    out["pooler_output"][0, 0] += nudge
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({k: v.clone() for k, v in out.items()}, path)
    return path


def test_the_course_reference_is_the_default_for_bert_base_uncased(wide_vocab_checkpoint, file_server, tmp_path,
                                                                 monkeypatch, capsys):
    """Where --fetch put the course's sanity_check.data, bert-base-uncased is checked against it (a wrong
    output there fails, though the NumPy pass of the same weights would agree); without it, against NumPy."""
    import sanity_check
    folder, _ = wide_vocab_checkpoint
    file_server.add_folder("/google-bert/bert-base-uncased/resolve/main", folder)  # served as bert-base-uncased
    monkeypatch.setenv("MINBERT_HF_ENDPOINT", file_server.url)
    monkeypatch.setenv("MINBERT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("MINBERT_OFFLINE", raising=False)
    monkeypatch.setattr(sanity_check, "DATA", tmp_path / "data")
    course = tmp_path / "data" / "sanity_check.data"

    _save_outputs(folder, course, nudge=0.01)  # not what the model gives: must fail when it is the reference
    monkeypatch.setitem(course_files.REFERENCE_BLOB_IDS, "sanity_check.data", git_blob_id(course))
    with pytest.raises(MinbertError, match=r"BERT differs from the course's sanity_check.data, "
                                           r".*data/sanity_check.data \(git blob .*pooler_output: 1 of"):
        sanity_check.main([])
    _save_outputs(folder, course)
    monkeypatch.setitem(course_files.REFERENCE_BLOB_IDS, "sanity_check.data", git_blob_id(course))
    sanity_check.main([])
    assert "checked against the course's sanity_check.data" in capsys.readouterr().out
    sanity_check.main(["--pretrained", str(folder)])  # the file holds bert-base-uncased's outputs only
    assert "NumPy forward pass of the same weights; the course's sanity_check.data holds bert-base-uncased's" \
        in capsys.readouterr().out
    monkeypatch.setitem(course_files.REFERENCE_BLOB_IDS, "sanity_check.data", "0" * 40)  # the user's own copy
    sanity_check.main([])
    assert "data/sanity_check.data, not the course's sanity_check.data (git blob" in capsys.readouterr().out
    # a text file, then a dict of other keys, in its place: one line naming that file, never a --reference not typed
    course.write_text("not a reference\n")
    with pytest.raises(MinbertError, match=r"data/sanity_check.data: cannot read the reference \(not a file torch.save "
                                           r"wrote: it begins b'not a re'\)"):
        sanity_check.main([])
    torch.save({"hidden": torch.zeros(1)}, course)
    with pytest.raises(MinbertError, match=r"^\S*data/sanity_check.data \(the course's sanity_check.data; python "
                                           r"datasets.py --fetch puts the right one there\): lacks last_hidden_state "
                                           r"and pooler_output \(it holds hidden\)"):
        sanity_check.main([])
    course.unlink()
    sanity_check.main([])
    assert ("NumPy forward pass of the same weights; the course's sanity_check.data is not in "
            f"{tmp_path / 'data'}: python datasets.py --fetch puts it there") in capsys.readouterr().out


def test_the_course_file_is_read_without_running_code():
    """The course's own sanity_check.data (data/ after setup.sh): torch.save's zip of a pickle, read by the
    restricted loader (tensors only), bert-base-uncased's two outputs."""
    import sanity_check
    path = real_data_folder() / "sanity_check.data"
    if not path.exists():
        pytest.skip("the course's sanity_check.data is not in data/ (python datasets.py --fetch)")
    assert git_blob_id(path) == course_files.REFERENCE_BLOB_IDS["sanity_check.data"]
    ref = sanity_check.read_reference(path)
    assert ref["last_hidden_state"].shape == (2, 8, 768) and ref["pooler_output"].shape == (2, 768)
