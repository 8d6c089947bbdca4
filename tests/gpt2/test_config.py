"""gpt2/config.py: HF's GPT-2 config names are read into the handout's, and written back so HF reads them."""
import pytest

from gpt2.config import ConfigError, GPT2Config


def test_hf_names_round_trip():
    from transformers import GPT2Config as HFConfig
    hf = HFConfig(n_embd=64, n_layer=3, n_head=4, n_positions=128, vocab_size=99).to_dict()
    ours = GPT2Config.from_dict(hf)
    assert (ours.hidden_size, ours.num_hidden_layers, ours.num_attention_heads, ours.max_position_embeddings,
            ours.intermediate_size, ours.vocab_size) == (64, 3, 4, 128, 256, 99)
    back = HFConfig.from_dict(ours.to_dict())
    assert (back.n_embd, back.n_layer, back.n_head, back.n_positions, back.vocab_size) == (64, 3, 4, 128, 99)


def test_bad_shapes_and_activations_are_named():
    with pytest.raises(ConfigError, match="not divisible"):
        GPT2Config(hidden_size=30, num_attention_heads=4)
    with pytest.raises(ConfigError, match="activation_function 'relu' is not supported"):
        GPT2Config.from_dict({"activation_function": "relu"})


def test_a_bert_checkpoints_config_is_named_as_one(hf_checkpoint):
    """A BERT folder given to a GPT-2 script: its config shares our names (hidden_size, ...), so without this it
    would pass and the weights fail tensor by tensor; the tokenizer reads the config first, before vocab.json."""
    from gpt2.tokenizer import GPT2Tokenizer
    from utils import MinbertError
    folder, _ = hf_checkpoint
    with pytest.raises(ConfigError, match=r"config.json: a bert checkpoint \(model_type 'bert'\), not a GPT-2 one: a "
                                          r"BERT is for the minBERT scripts at the project's top"):
        GPT2Config.from_json_file(folder / "config.json")
    with pytest.raises(MinbertError, match=r"a bert checkpoint \(model_type 'bert'\), not a GPT-2 one"):
        GPT2Tokenizer.from_pretrained(folder)


@pytest.mark.parametrize("bad, message", [
    ({"vocab_size": None}, "config field 'vocab_size' must be int, got None"),
    ({"n_positions": "64"}, "config field 'n_positions' must be int, got '64'"),
    ({"n_layer": 2.5}, "config field 'n_layer' must be int, got 2.5"),
    ({"layer_norm_epsilon": "x"}, "config field 'layer_norm_epsilon' must be float"),
    ({"n_head": 0}, "n_head 0: a size must be at least 1"),
])
def test_wrong_values_in_config_json_are_named_as_the_file_spells_them(tmp_path, bad, message):
    """Each was a TypeError or ZeroDivisionError traceback when the model was built."""
    import json
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "gpt2", "n_embd": 32, "n_head": 4, **bad}))
    with pytest.raises(ConfigError, match=rf"config.json: {message}"):
        GPT2Config.from_json_file(path)
