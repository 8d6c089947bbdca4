"""tools/tiny_gpt2.py: the folder it writes is a GPT-2 checkpoint the GPT-2 scripts load and HF transformers loads too
(the same outputs; gpt2/sanity_check.py passes on it), its vocabulary learnt from the sonnets (its merges shorten a
sonnet line; <|endoftext|> is its end token); a folder holding files is refused."""
import pytest
import torch

from gpt2.models.gpt2 import GPT2Model
from gpt2.tokenizer import GPT2Tokenizer
from tests.course import ROOT
from tests.gpt2.test_sonnet_pipeline import sonnet_files
from tests.processes import run_main
from tools import tiny_gpt2
from utils import MinbertError


def test_the_folder_loads_as_a_gpt2_and_its_vocabulary_fits_the_sonnets(tmp_path):
    files = sonnet_files(tmp_path / "data")
    out = tiny_gpt2.main([str(tmp_path / "tiny"), "--sonnets", str(files / "sonnets.txt"), "--vocab_size", "300",
                          "--n_embd", "32", "--n_layer", "2", "--n_head", "2", "--n_positions", "128"])
    model, tok = GPT2Model.from_pretrained(out), GPT2Tokenizer.from_pretrained(out)
    assert (model.config.hidden_size, model.config.num_hidden_layers, model.config.max_position_embeddings) == (32, 2, 128)
    assert model.config.vocab_size == 300 and model.config.eos_token_id == tok.eos_token_id
    line = "From fairest creatures we desire increase,\n"
    assert tok.decode(tok.encode(line)) == line and len(tok.encode(line)) < len(line)  # merges learnt
    from transformers import GPT2LMHeadModel
    hf, info = GPT2LMHeadModel.from_pretrained(out, output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"] and not info["mismatched_keys"]
    ids = torch.tensor([tok.encode(line)])
    with torch.no_grad():
        theirs = hf.eval().transformer(ids).last_hidden_state
        ours = model.eval()(ids, torch.ones_like(ids))["last_hidden_state"]
    torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=1e-4)
    checked = run_main("gpt2/sanity_check.py", "--pretrained", str(out), cwd=ROOT / "gpt2")
    assert checked.returncode == 0 and "Your GPT-2 implementation is correct!" in checked.stdout, checked.stderr
    with pytest.raises(MinbertError, match=r"tiny: exists and is not an empty folder; give a new one"):
        tiny_gpt2.main([str(out), "--sonnets", str(files / "sonnets.txt")])


@pytest.mark.parametrize("argv, match", [
    (["--n_embd", "30", "--n_head", "4"], r"--n_embd 30 --n_head 4: the width must be a multiple of the number "
                                          r"of heads"),
    (["--n_positions", "0"], r"--n_positions: 0 must be an integer >= 1"),
    (["--n_layer", "-1"], r"--n_layer: -1 must be an integer >= 1"),
    (["--seed", "-1"], r"--seed: -1 must be an integer from 0 to 4294967295")])  # as every other --seed
def test_a_shape_no_model_can_take_is_one_line_and_writes_nothing(tmp_path, argv, match):
    """Refused before the vocabulary is written, so that the same command, mended, runs in the same folder."""
    files = sonnet_files(tmp_path / "data")
    with pytest.raises(MinbertError, match=match):
        tiny_gpt2.main([str(tmp_path / "tiny"), "--sonnets", str(files / "sonnets.txt"), *argv])
    assert not (tmp_path / "tiny").exists()


def test_where_it_may_not_write_and_a_model_too_large_leave_nothing(tmp_path, monkeypatch):
    """A broken link, a folder among the project's code or data: one line each; a shape the memory cannot hold
    fails before the vocabulary is written, so the same folder takes the mended command."""
    files = sonnet_files(tmp_path / "data")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "gone")
    with pytest.raises(MinbertError, match=r"link: a broken link \(its target is missing\); give a new folder"):
        tiny_gpt2.main([str(link), "--sonnets", str(files / "sonnets.txt")])
    for inside in ("data", "gpt2", "minbert"):
        with pytest.raises(MinbertError, match=r"among the project's own code, docs or data"):
            tiny_gpt2.main([str(ROOT / inside / "tg-test"), "--sonnets", str(files / "sonnets.txt")])
        assert not (ROOT / inside / "tg-test").exists()
    (tmp_path / "afile").write_text("mine\n")  # a file (it had been "not an empty folder"), a run's folder
    with pytest.raises(MinbertError, match=r"afile: is a file, where the checkpoint's folder goes"):
        tiny_gpt2.main([str(tmp_path / "afile"), "--sonnets", str(files / "sonnets.txt")])
    from tests.course import mark_run
    (tmp_path / "run").mkdir()
    mark_run(tmp_path / "run", "multitask", {})
    with pytest.raises(MinbertError, match=r"run/sub: inside .*run, the folder of a run"):
        tiny_gpt2.main([str(tmp_path / "run" / "sub"), "--sonnets", str(files / "sonnets.txt")])
    assert not (tmp_path / "run" / "sub").exists() and (tmp_path / "afile").read_text() == "mine\n"

    def too_large(config):
        raise MemoryError("out of memory")
    monkeypatch.setattr(tiny_gpt2, "GPT2Model", too_large)
    with pytest.raises(MemoryError):
        tiny_gpt2.main([str(tmp_path / "big"), "--sonnets", str(files / "sonnets.txt"), "--vocab_size", "300"])
    assert not (tmp_path / "big").exists()


def test_the_config_names_the_begin_token_as_hf_expects(tmp_path):
    """GPT-2 begins and ends with <|endoftext|>: config.json names it as bos_token_id too (HF warns otherwise)."""
    import json
    files = sonnet_files(tmp_path / "data")
    out = tiny_gpt2.main([str(tmp_path / "t"), "--sonnets", str(files / "sonnets.txt"), "--vocab_size", "300",
                          "--n_embd", "16", "--n_layer", "1", "--n_head", "2", "--n_positions", "32"])
    config = json.loads((out / "config.json").read_text())
    assert config["bos_token_id"] == config["eos_token_id"] == json.loads((out / "vocab.json").read_text())["<|endoftext|>"]
