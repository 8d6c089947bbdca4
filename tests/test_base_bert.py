"""base_bert.py: damaged weights are named with what to do: replace a file in the user's own folder, download
again one in the cache."""
import pytest

from utils import MinbertError


def test_damaged_weights_in_a_users_own_folder_are_not_to_be_deleted(tmp_path, tiny_model):
    from bert import BertModel
    (tiny_model / "model.safetensors").write_bytes(b"not weights")
    with pytest.raises(MinbertError) as e:
        BertModel.from_pretrained(str(tiny_model))
    assert "replace it with a good copy" in str(e.value) and "delete" not in str(e.value)


def test_damaged_weights_in_the_cache_may_be_downloaded_again(tmp_path, monkeypatch, tiny_model):
    from base_bert import read_state_dict
    monkeypatch.setenv("MINBERT_CACHE", str(tmp_path / "cache"))
    bad = tmp_path / "cache" / "org--m" / "model.safetensors"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"junk")
    with pytest.raises(MinbertError, match="delete it to download it again"):
        read_state_dict(bad)
