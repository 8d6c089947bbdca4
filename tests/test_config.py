"""config.py: bert-base defaults, config.json round trips keeping unknown keys, wrong values refused by name."""
import json

import pytest

from config import BertConfig, ConfigError


def test_defaults_are_bert_base():
    c = BertConfig()
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.intermediate_size) == (768, 12, 12, 3072)
    assert (c.vocab_size, c.max_position_embeddings, c.type_vocab_size) == (30522, 512, 2)
    assert c.layer_norm_eps == 1e-12 and c.hidden_dropout_prob == 0.1 and c.pad_token_id == 0


def test_json_round_trip_keeps_unknown_keys(tmp_path):
    p = tmp_path / "config.json"
    p.write_text(json.dumps({"hidden_size": 384, "num_attention_heads": 12, "architectures": ["BertModel"],
                             "model_type": "bert", "layer_norm_eps": 1}))
    c = BertConfig.from_json_file(p)
    assert c.hidden_size == 384 and c.extra == {"architectures": ["BertModel"], "model_type": "bert"}
    assert isinstance(c.layer_norm_eps, float)  # an int where a float is expected is fine
    c.to_json_file(tmp_path / "out.json")
    again = json.loads((tmp_path / "out.json").read_text())
    assert again["architectures"] == ["BertModel"] and again["hidden_size"] == 384
    assert "attn_impl" not in again  # a runtime choice, not part of the checkpoint


@pytest.mark.parametrize("bad, match", [
    ({"hidden_size": "768"}, "hidden_size"),
    ({"num_hidden_layers": 2.5}, "num_hidden_layers"),
    ({"hidden_dropout_prob": "0.1"}, "hidden_dropout_prob"),
    ({"num_attention_heads": True}, "num_attention_heads"),
    ({"hidden_size": 100, "num_attention_heads": 12}, "divisible"),
    ({"hidden_act": "relu"}, "hidden_act"),
])
def test_wrong_values_are_refused_by_name(tmp_path, bad, match):
    p = tmp_path / "config.json"
    p.write_text(json.dumps(bad))
    with pytest.raises(ConfigError, match=match) as e:
        BertConfig.from_json_file(p)
    assert str(p) in str(e.value)


def test_missing_and_broken_files(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        BertConfig.from_json_file(tmp_path / "nope.json")
    (tmp_path / "bad.json").write_text("{oops")
    with pytest.raises(ConfigError, match="not valid JSON"):
        BertConfig.from_json_file(tmp_path / "bad.json")


def test_a_gpt2_checkpoints_config_is_named_as_one(tiny_gpt2):
    """GPT-2's config.json (pad_token_id null) to a BERT script: which checkpoint it is and which scripts take it,
    not a field's type."""
    with pytest.raises(ConfigError, match=r"config.json: a GPT-2 checkpoint \(model_type 'gpt2'\), not a BERT one: "
                                          r"the Build GPT-2 scripts take it \(cd gpt2 && python classifier.py"):
        BertConfig.from_json_file(tiny_gpt2 / "config.json")
