"""tools/tiny_gpt2.py: the folder it writes is a GPT-2 checkpoint the GPT-2 scripts load, its vocabulary learnt from
the sonnets (its merges shorten a sonnet line; <|endoftext|> is its end token); a folder holding files is refused."""
import pytest

from gpt2.models.gpt2 import GPT2Model
from gpt2.tokenizer import GPT2Tokenizer
from tests.gpt2.test_sonnet_pipeline import sonnet_files
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
    with pytest.raises(MinbertError, match=r"tiny: exists and is not an empty folder; give a new one"):
        tiny_gpt2.main([str(out), "--sonnets", str(files / "sonnets.txt")])
