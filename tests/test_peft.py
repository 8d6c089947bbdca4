"""--fine-tune-mode lora|dora in both pipelines, --pals, the trainable-parameter line, and ensemble.py."""
import json
import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch

import classifier
import ensemble
import multitask_classifier as mt
from bert import BertModel
from checkpoint import ModelSpec
from conftest import ROOT, part1_args, part2_args as mt_args, tiny_config
from finetune import merge_for_inference
from pals import PALs, default_dim
from trainer import describe_trainable
from utils import MinbertError


def _files(folder):
    return {p.name: p.read_text() for p in sorted(folder.glob("*-output.csv"))}


def _config(model, mode="full-model", **kw):
    return ModelSpec(**{**dict(pretrained=str(model), fine_tune_mode=mode, dropout=[0.0] * 3, lora_rank=4,
                               lora_alpha=8.0), **kw})


def _batch():
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(5, 40, (2, 7), generator=g)
    return ids, torch.ones_like(ids), torch.zeros_like(ids)


@pytest.mark.parametrize("mode", ["lora", "dora"])
def test_a_rank_above_the_hidden_size_is_refused(tiny_model, mode):
    """B A has rank at most min(in, out), the hidden size for every target: a larger r only adds parameters."""
    mt.MultitaskBERT(_config(tiny_model, mode, lora_rank=32))  # the tiny model's hidden size: full rank, allowed
    with pytest.raises(MinbertError, match=r"--lora_rank 33: above the hidden size 32 .* at most --lora_rank 32"):
        mt.MultitaskBERT(_config(tiny_model, mode, lora_rank=33))


@pytest.mark.parametrize("mode", ["lora", "dora"])
def test_only_adapters_and_heads_get_gradients(tiny_model, mode):
    model = mt.MultitaskBERT(_config(tiny_model, mode))
    ids, mask, types = _batch()
    (model.predict_sentiment(ids, mask).sum() + model.predict_paraphrase(ids, mask, token_type_ids=types).sum()
     + model.predict_similarity(ids, mask, token_type_ids=types).sum()).backward()
    with_grad = {n for n, p in model.named_parameters() if p.grad is not None}
    allowed = ("lora_A", "lora_B") + (("magnitude",) if mode == "dora" else ())
    assert with_grad == {n for n, p in model.named_parameters() if p.requires_grad}
    assert all(n.startswith(("sst_head", "para_head", "sts_head")) or n.split(".")[-1] in allowed for n in with_grad)
    assert any("lora_B" in n for n in with_grad) and any(n.startswith("sst_head") for n in with_grad)


def test_trainable_line_counts_by_hand(capsys):
    lin = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    lin[0].weight.requires_grad = False
    info = describe_trainable(lin)
    # trainable: bias 4 + weight 8 + bias 2 = 14 of 12 + 4 + 8 + 2 = 26; AdamW keeps two fp32 tensors of each
    assert info == {"trainable": 14, "total": 26, "optimizer_state_bytes": 2 * 14 * 4}
    assert "trainable parameters: 14 of 26 (53.85%)" in capsys.readouterr().out


def test_pals_default_dim():
    assert default_dim(768, 12) == 204  # the paper's BERT-base setting
    assert default_dim(384, 12) == 96 and default_dim(32, 4) == 8


def test_pal_with_zero_output_projection_leaves_bert_unchanged():
    torch.manual_seed(0)
    bert = BertModel(tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)).eval()
    ids, mask, _ = _batch()
    mask[1, 5:] = 0
    before = bert(ids, mask)["last_hidden_state"]
    pals = PALs(bert.config, ("sst", "sts"))
    pals.attach(bert)
    pals.task = "sst"
    torch.testing.assert_close(bert(ids, mask)["last_hidden_state"], before, rtol=0, atol=0)
    with torch.no_grad():
        for d in pals.decoder.values():
            d.weight.normal_(0, 0.5)
    pals.task = "sst"
    sst = bert(ids, mask)["last_hidden_state"]
    pals.task = "sts"
    assert not torch.allclose(sst, before) and not torch.allclose(sst, bert(ids, mask)["last_hidden_state"])


def test_pals_on_a_frozen_backbone_train_alone(tiny_model):
    model = mt.MultitaskBERT(_config(tiny_model, "last-linear-layer", pals=True))
    ids, mask, _ = _batch()
    model.predict_sentiment(ids, mask).sum().backward()
    with_grad = {n.split(".")[0] for n, p in model.named_parameters() if p.grad is not None}
    assert with_grad == {"pals", "sst_head"}
    assert all(p.grad is None for p in model.bert.parameters())
    # only SST's branch took part in an SST batch
    assert all(p.grad is None for n, p in model.pals.named_parameters() if "sst" not in n)


@pytest.mark.parametrize("mode", ["lora", "dora"])
def test_multitask_adapters_end_to_end_merge_and_wrong_mode(tmp_path, course_data, tiny_model, mode, capsys):
    # fp32 (--amp none): the claim below is the algebra of merging, W0 + (alpha / r) B A computing what the
    # adapters did. Under --amp auto a CPU with native bf16 rounds the merged and the unmerged products
    # differently (one bf16 step near an STS score of 2.5 is 0.0156) and can flip a near-tied label, so at
    # that precision the comparison would test rounding, not merging.
    plain = mt_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--amp", "none")
    mt.main(plain + ["--lora_rank", "2", "--fine-tune-mode", mode])
    out = capsys.readouterr().out
    assert "trainable parameters: " in out and "AdamW state" in out
    saved = torch.load(tmp_path / "ck" / "mt.pt", weights_only=True)
    assert saved["spec"]["fine_tune_mode"] == mode
    bert_keys = [k for k in saved["model"] if k.startswith("bert.")]
    assert bert_keys and all(k.split(".")[-1] in ("lora_A", "lora_B", "magnitude") for k in bert_keys)
    before = _files(tmp_path / "pred")
    for p in (tmp_path / "pred").glob("*-output.csv"):
        p.unlink()
    # the mode and the rank come from the checkpoint (plain's --fine-tune-mode full-model is overridden below)
    plain = [a for a in plain if a not in ("--fine-tune-mode", "full-model")]
    mt.main(plain + ["--merge", "--eval_only", str(tmp_path / "ck" / "mt.pt")])
    assert "merged 4 adapters" in capsys.readouterr().out  # 2 layers x (query, value)
    merged = _files(tmp_path / "pred")
    assert merged.keys() == before.keys()
    for name in before:  # the merged weights predict what the adapters did (STS to 4 decimals)
        a, b = before[name].splitlines(), merged[name].splitlines()
        if name.startswith("sts"):
            assert np.allclose([float(l.split(" , ")[1]) for l in a[1:]], [float(l.split(" , ")[1]) for l in b[1:]],
                               atol=2e-4)
        else:
            assert a == b
    wrong = subprocess.run([sys.executable, "multitask_classifier.py", *plain, "--fine-tune-mode", "full-model",
                            "--eval_only", str(tmp_path / "ck" / "mt.pt")], cwd=ROOT, capture_output=True, text=True)
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr and len(wrong.stderr.strip().splitlines()) == 1
    assert f"--fine-tune-mode '{mode}' in the checkpoint, 'full-model' given" in wrong.stderr


def test_merge_needs_adapters(tmp_path, course_data, tiny_model):
    with pytest.raises(MinbertError, match="--merge folds LoRA/DoRA"):
        mt.main(mt_args(tmp_path, course_data, tiny_model, "--merge"))


def test_multitask_pals_end_to_end(tmp_path, course_data, tiny_model, capsys):
    mt.main(mt_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--pals", "--pals_dim", "8",
                    "--fine-tune-mode", "last-linear-layer"))
    saved = torch.load(tmp_path / "ck" / "mt.pt", weights_only=True)["model"]
    assert any(k.startswith("pals.") for k in saved) and not any(k.startswith("bert.") for k in saved)
    assert "last-linear-layer + PALs" in capsys.readouterr().out
    with pytest.raises(MinbertError, match="--pals_dim 8 in the checkpoint, 16 given"):
        mt.main(mt_args(tmp_path, course_data, tiny_model, "--pals_dim", "16",
                        "--eval_only", str(tmp_path / "ck" / "mt.pt")))


@pytest.mark.parametrize("mode", ["lora", "dora"])
def test_classifier_adapters_with_merge(tmp_path, course_data, tiny_model, mode, capsys):
    results = classifier.main(part1_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--datasets", "sst",
                                         "--fine-tune-mode", mode, "--merge"))
    out = capsys.readouterr().out
    assert "merged 4 adapters" in out and "trainable parameters" in out
    assert (tmp_path / "pred" / f"{mode}-sst-dev-out.csv").is_file() and 0 <= results[0]["dev_acc"] <= 1
    saved = torch.load(tmp_path / "ck" / f"{mode}-sst.pt", weights_only=True)["model"]
    assert all(k.startswith("classifier.") or k.split(".")[-1] in ("lora_A", "lora_B", "magnitude") for k in saved)


# ----------------------------------------------------------------------------- ensemble.py

@pytest.fixture
def trained(tmp_path, course_data, tiny_model):
    """One trained multitask checkpoint and its six files."""
    mt.main(mt_args(tmp_path, course_data, tiny_model, "--epochs", "1"))
    return tmp_path / "ck" / "mt.pt", tmp_path / "pred"


def test_ensemble_of_two_copies_reproduces_the_model(tmp_path, course_data, trained, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ckpt, pred = trained
    copy = tmp_path / "copy.pt"
    shutil.copyfile(ckpt, copy)
    scores = ensemble.main([str(ckpt), str(copy), "--data_dir", str(course_data), "--out", str(tmp_path / "ens")])
    assert _files(tmp_path / "ens") == _files(pred)
    out = capsys.readouterr().out
    assert "six files in runs/ensemble-" in out and f"predictions copied to {tmp_path / 'ens'}" in out
    # folders of prediction files: a vote of two copies is the copy; published over the first ensemble's
    # files, which the line names (they stay in the first ensemble's run folder)
    folder = tmp_path / "copy"
    shutil.copytree(pred, folder)
    again = ensemble.main([str(pred), str(folder), "--data_dir", str(course_data), "--out", str(tmp_path / "ens"),
                           "--run_name", "vote"])
    assert _files(tmp_path / "runs" / "vote") == _files(pred)
    assert again == pytest.approx(scores, abs=1e-3)  # files hold STS to 4 decimals
    sources = json.loads((tmp_path / "ens" / ".sources.json").read_text())
    assert {v["run"] for v in sources.values()} == {"vote"}


def test_ensemble_refuses_a_member_twice_and_a_bad_one_before_running_any(tmp_path, course_data, trained, monkeypatch):
    monkeypatch.chdir(tmp_path)
    ckpt, pred = trained
    with pytest.raises(MinbertError, match="the same member as"):
        ensemble.main([str(pred), str(pred) + "/", "--data_dir", str(course_data)])
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    monkeypatch.setattr(ensemble, "checkpoint_member", lambda *a: pytest.fail("a member ran before all were checked"))
    with pytest.raises(MinbertError, match="junk.pt: cannot read checkpoint"):
        ensemble.main([str(ckpt), str(tmp_path / "junk.pt"), "--data_dir", str(course_data)])
    assert not (tmp_path / "runs").exists() and not (tmp_path / "predictions").exists()


def test_ensemble_averages_probabilities(tmp_path):
    a, b = np.array([[2.0, 0, 0, 0, 0]]), np.array([[0.0, 3, 0, 0, 0]])
    mean = (ensemble.as_probabilities("sst", a) + ensemble.as_probabilities("sst", b)) / 2
    assert ensemble.decide("sst", mean)[0] == 1  # class 1 wins on probability, though logits 2 vs 3 tie per-model
    q = (ensemble.as_probabilities("quora", np.array([4.0])) + ensemble.as_probabilities("quora", np.array([-1.0]))) / 2
    assert ensemble.decide("quora", q)[0] == 1


def test_ensemble_refuses_mismatched_members(tmp_path, course_data, trained, tiny_model):
    ckpt, pred = trained
    bad = tmp_path / "bad"
    shutil.copytree(pred, bad)
    lines = (bad / "sts-dev-output.csv").read_text().splitlines()
    (bad / "sts-dev-output.csv").write_text("\n".join(lines[:1] + ["deadbeef , 3.0"] + lines[2:]) + "\n")
    with pytest.raises(MinbertError, match=r"sts-dev-output.csv: its ids are not those of sts dev: id deadbeef"):
        ensemble.main([str(ckpt), str(bad), "--data_dir", str(course_data), "--out", str(tmp_path / "e")])
    classifier.main(part1_args(tmp_path / "cls", course_data, tiny_model, "--epochs", "1", "--datasets", "cfimdb"))
    with pytest.raises(MinbertError, match="not a multitask_classifier.py checkpoint \\(it was written by classifier.py\\)"):
        ensemble.main([str(ckpt), str(tmp_path / "cls" / "ck" / "last-linear-layer-cfimdb.pt"), "--data_dir",
                       str(course_data), "--out", str(tmp_path / "e")])
    assert not (tmp_path / "e").exists()  # refused before anything was written


def test_bench_times_adapters_and_measures_their_optimizer_state(tmp_path, course_data, tiny_model):
    figures = {}
    for mode in ("full-model", "lora"):
        out = subprocess.run([sys.executable, "bench.py", "--pretrained", str(tiny_model), "--data", "sst",
                              "--data_dir", str(course_data), "--steps", "2", "--warmup", "1", "--repeats", "1",
                              "--batch_size", "8", "--peak_repeats", "1", "--fine-tune-mode", mode, "--lora_rank", "2",
                              "--json", str(tmp_path / f"{mode}.json")], cwd=ROOT, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr[-2000:]
        run = __import__("json").loads((tmp_path / f"{mode}.json").read_text())["runs"][0]
        assert run["fine_tune_mode"] == mode and f"{run['trainable_params']:,} trainable parameters" in out.stdout
        # AdamW's measured state: exp_avg and exp_avg_sq in fp32 for each trainable parameter (+ step counts)
        assert run["optimizer_state_mb"] * 2 ** 20 >= 8 * run["trainable_params"]
        assert run["optimizer_state_mb"] * 2 ** 20 <= 8 * run["trainable_params"] + 8 * 1000
        figures[mode] = run["trainable_params"]
    # rank-2 adapters on query and value of 2 layers: 2 x 2 x (2 x 32 + 32 x 2), plus the 5-way head
    assert figures["lora"] == 2 * 2 * (2 * 32 + 32 * 2) + 32 * 5 + 5 < figures["full-model"]


def test_adapter_state_into_a_plain_model_names_the_mode(tiny_model):
    from checkpoint import load_trainable_state, trainable_state
    lora = mt.MultitaskBERT(_config(tiny_model, "lora"))
    plain = mt.MultitaskBERT(_config(tiny_model, "full-model"))
    with pytest.raises(MinbertError, match="holds LoRA/DoRA adapters and this model has none"):
        load_trainable_state(plain, trainable_state(lora), "ck.pt")
    with pytest.raises(MinbertError, match="this model has adapters and the checkpoint none"):
        load_trainable_state(lora, trainable_state(plain), "ck.pt")


# ----------------------------------------------------------------------------- Houlsby adapters and prefix tuning

def _grads(model):
    ids, mask, types = _batch()
    (model.predict_sentiment(ids, mask).sum() + model.predict_paraphrase(ids, mask, token_type_ids=types).sum()
     + model.predict_similarity(ids, mask, token_type_ids=types).sum()).backward()
    return {n for n, p in model.named_parameters() if p.grad is not None}


def test_houlsby_adapters_train_with_the_layer_norms_and_start_near_the_identity(tiny_model):
    from houlsby import HoulsbyAdapter
    model = mt.MultitaskBERT(_config(tiny_model, "adapter", adapter_dim=4))
    layers = model.bert.bert_layers
    assert all(isinstance(l.attention_dense, HoulsbyAdapter) and isinstance(l.out_dense, HoulsbyAdapter) for l in layers)
    with_grad = _grads(model)
    assert with_grad == {n for n, p in model.named_parameters() if p.requires_grad}
    bert_part = {n for n in with_grad if n.startswith("bert.")}
    assert bert_part and all(".down." in n or ".up." in n or "layer_norm" in n for n in bert_part)
    assert sum(1 for n in bert_part if n.endswith("down.weight")) == 2 * len(layers)  # two adapters a layer
    # near the identity at the start: the pretrained model's output, moved only a little
    plain = BertModel.from_pretrained(str(tiny_model)).eval()
    model.eval()
    ids, mask, _ = _batch()
    diff = (model.bert(ids, mask)["last_hidden_state"] - plain(ids, mask)["last_hidden_state"]).abs().max().item()
    assert 0 < diff < 0.05


def test_merge_is_refused_for_houlsby_adapters_saying_why(tmp_path, course_data, tiny_model):
    with pytest.raises(MinbertError, match="--merge cannot fold Houlsby adapters: a nonlinearity sits between"):
        mt.main(mt_args(tmp_path, course_data, tiny_model, "--fine-tune-mode", "adapter", "--merge"))


def test_prefix_tuning_trains_only_the_prefix_and_every_token_attends_to_it(tiny_model):
    model = mt.MultitaskBERT(_config(tiny_model, "prefix", prefix_length=3))
    with_grad = _grads(model)
    bert_part = {n for n in with_grad if n.startswith("bert.")}
    assert bert_part == {n for n, p in model.bert.named_parameters(prefix="bert") if n.startswith("bert.prefix_tuning.")}
    # the two attention paths agree with the prefix's keys and values prepended, padding included
    bert = model.bert.eval()
    ids, mask, _ = _batch()
    mask[1, 4:] = 0
    sdpa = bert(ids, mask)["last_hidden_state"]
    for layer in bert.bert_layers:
        layer.self_attention.attn_impl = "explicit"
    torch.testing.assert_close(bert(ids, mask)["last_hidden_state"], sdpa, rtol=1e-5, atol=1e-5)
    kv = bert.prefix_tuning.keys_values()
    assert kv.shape == (2, 2, 4, 3, 8)  # layers, key/value, heads, length, head size
    # the prefix is attended: the output moves away from the plain model's, and back when the prefix is detached
    plain = BertModel.from_pretrained(str(tiny_model)).eval()
    assert not torch.allclose(sdpa, plain(ids, mask)["last_hidden_state"], atol=1e-4)
    for layer in bert.bert_layers:
        layer.self_attention.prefix = None
    torch.testing.assert_close(bert(ids, mask)["last_hidden_state"], plain(ids, mask)["last_hidden_state"])


def test_merging_a_prefix_drops_its_mlp_and_predicts_the_same(tiny_model):
    model = mt.MultitaskBERT(_config(tiny_model, "prefix")).eval()
    ids, mask, types = _batch()
    with torch.no_grad():
        before = model.predict_similarity(ids, mask, token_type_ids=types)
        merge_for_inference(model.bert, True, "prefix", log=lambda *_: None)
        after = model.predict_similarity(ids, mask, token_type_ids=types)
    assert not hasattr(model.bert.prefix_tuning, "mlp") and model.bert.prefix_tuning.folded is not None
    torch.testing.assert_close(after, before, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode, extra", [("adapter", ["--adapter_dim", "4"]), ("prefix", ["--prefix_length", "3"])])
def test_adapter_and_prefix_modes_end_to_end(tmp_path, course_data, tiny_model, mode, extra):
    # fp32: the --merge comparison below is the prefix fold's algebra, not rounding (see the LoRA test above)
    args = mt_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--amp", "none", "--fine-tune-mode", mode, *extra)
    mt.main(args)
    saved = torch.load(tmp_path / "ck" / "mt.pt", weights_only=True)
    assert saved["spec"]["fine_tune_mode"] == mode
    bert_keys = [k for k in saved["model"] if k.startswith("bert.")]
    assert bert_keys and all((".down." in k or ".up." in k or "layer_norm" in k) if mode == "adapter"
                             else k.startswith("bert.prefix_tuning.") for k in bert_keys)
    before = _files(tmp_path / "pred")
    # the mode and its settings come from the checkpoint
    again = [a for a in mt_args(tmp_path, course_data, tiny_model, "--amp", "none") if a not in ("--fine-tune-mode", "full-model")]
    mt.main(again + ["--eval_only", str(tmp_path / "ck" / "mt.pt")] + (["--merge"] if mode == "prefix" else []))
    after = _files(tmp_path / "pred")
    for name in before:
        if name.startswith("sts"):
            a = [float(l.split(" , ")[1]) for l in before[name].splitlines()[1:]]
            b = [float(l.split(" , ")[1]) for l in after[name].splitlines()[1:]]
            assert np.allclose(a, b, atol=2e-4)
        else:
            assert before[name] == after[name]
