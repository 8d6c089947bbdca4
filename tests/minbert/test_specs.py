"""specs.py: a model spec resolves its pipeline's defaults, travels through a checkpoint as plain values and back,
and refuses fields a newer minbert wrote."""
import pytest

from minbert.cli import MinbertError
from minbert.specs import MAX_LENGTH, ModelSpec


def test_a_model_spec_takes_its_pipelines_defaults_and_round_trips_through_plain_values():
    spec = ModelSpec(pipeline="classifier", lora_targets=["query", "key"], dropout=[0.2, 0.3])
    assert spec.max_length == MAX_LENGTH["classifier"] == 512 and ModelSpec().max_length == 128
    assert spec.lora_targets == ("query", "key") and ModelSpec().lora_targets == ("query", "value")
    d = spec.to_dict()
    assert d["lora_targets"] == ["query", "key"] and d["dropout"] == [0.2, 0.3]  # lists: what a checkpoint holds
    assert ModelSpec.from_dict(d) == spec
    assert spec.differences({"max_length": 512, "lora_targets": ["query", "key"], "lora_rank": 4}) == [
        ("lora_rank", 8, 4)]
    with pytest.raises(MinbertError, match=r"^ck.pt: the model spec has fields this minbert does not know "
                                           r"\(new_field\); it was written by a newer version"):
        ModelSpec.from_dict({**d, "new_field": 1}, source="ck.pt")

