"""finetuning/modes.py: what --fine-tune-mode trains in both pipelines (only the adapters and heads get gradients,
a rank above the hidden size is refused) and what --merge folds (the same predictions, refused where there is
nothing to fold)."""

import numpy as np
import pytest
import torch

import classifier
import multitask_classifier as mt
from tests.checkpoints import multitask_spec, tiny_batch
from tests.course import eval_only_args, output_files, overridden, part1_args, part2_args
from tests.processes import run_main
from utils import MinbertError


@pytest.mark.parametrize("mode", ["lora", "dora"])
def test_a_rank_above_the_hidden_size_is_refused(tiny_model, mode):
    """B A has rank at most min(in, out), the hidden size for every target: a larger r only adds parameters."""
    mt.MultitaskBERT(multitask_spec(tiny_model, mode, lora_rank=32))  # the tiny model's hidden size: full rank, allowed
    with pytest.raises(MinbertError, match=r"--lora_rank 33: above the hidden size 32 .* at most --lora_rank 32"):
        mt.MultitaskBERT(multitask_spec(tiny_model, mode, lora_rank=33))


def test_an_adapter_bottleneck_wider_than_the_hidden_size_is_refused(tiny_model):
    """A bottleneck squeezes: 100,000 wide on a 32-wide model had trained some 25M parameters on a 38k model."""
    mt.MultitaskBERT(multitask_spec(tiny_model, "adapter", adapter_dim=32))
    with pytest.raises(MinbertError, match=r"--adapter_dim 33: above the hidden size 32 .* at most --adapter_dim 32"):
        mt.MultitaskBERT(multitask_spec(tiny_model, "adapter", adapter_dim=33))


@pytest.mark.parametrize("mode", ["lora", "dora"])
def test_only_adapters_and_heads_get_gradients(tiny_model, mode):
    model = mt.MultitaskBERT(multitask_spec(tiny_model, mode))
    ids, mask, types = tiny_batch()
    (model.predict_sentiment(ids, mask).sum() + model.predict_paraphrase(ids, mask, token_type_ids=types).sum()
     + model.predict_similarity(ids, mask, token_type_ids=types).sum()).backward()
    with_grad = {n for n, p in model.named_parameters() if p.grad is not None}
    allowed = ("lora_A", "lora_B") + (("magnitude",) if mode == "dora" else ())
    assert with_grad == {n for n, p in model.named_parameters() if p.requires_grad}
    assert all(n.startswith(("sst_head", "para_head", "sts_head")) or n.split(".")[-1] in allowed for n in with_grad)
    assert any("lora_B" in n for n in with_grad) and any(n.startswith("sst_head") for n in with_grad)


@pytest.mark.parametrize("mode", ["lora", "dora"])
def test_multitask_adapters_end_to_end_merge_and_wrong_mode(tmp_path, course_data, tiny_model, mode, capsys):
    # fp32 (--amp none): the claim below is the algebra of merging, W0 + (alpha / r) B A computing what the
    # adapters did. Under --amp auto a CPU with native bf16 rounds the merged and the unmerged products
    # differently (one bf16 step near an STS score of 2.5 is 0.0156) and can flip a near-tied label, so at
    # that precision the comparison would test rounding, not merging.
    plain = part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--amp", "none")
    mt.main(overridden(plain, ["--lora_rank", "2", "--fine-tune-mode", mode]))
    out = capsys.readouterr().out
    assert "trainable parameters: " in out and "AdamW state" in out
    saved = torch.load(tmp_path / "ck" / "mt.pt", weights_only=True)
    assert saved["spec"]["fine_tune_mode"] == mode
    bert_keys = [k for k in saved["model"] if k.startswith("bert.")]
    assert bert_keys and all(k.split(".")[-1] in ("lora_A", "lora_B", "magnitude") for k in bert_keys)
    before = output_files(tmp_path / "pred")
    for p in (tmp_path / "pred").glob("*-output.csv"):
        p.unlink()
    # the mode and the rank come from the checkpoint (plain's --fine-tune-mode full-model is overridden below)
    plain = [a for a in plain if a not in ("--fine-tune-mode", "full-model")]
    mt.main(eval_only_args(plain, tmp_path / "ck" / "mt.pt", tmp_path / "eval") + ["--merge"])
    assert "merged 4 adapters" in capsys.readouterr().out  # 2 layers x (query, value)
    merged = output_files(tmp_path / "pred")
    assert merged.keys() == before.keys()
    for name in before:  # the merged weights predict what the adapters did (STS to 4 decimals)
        a, b = before[name].splitlines(), merged[name].splitlines()
        if name.startswith("sts"):
            assert np.allclose([float(l.split(" , ")[1]) for l in a[1:]], [float(l.split(" , ")[1]) for l in b[1:]],
                               atol=2e-4)
        else:
            assert a == b
    wrong = run_main("multitask_classifier.py", *eval_only_args(
        plain + ["--fine-tune-mode", "full-model"], tmp_path / "ck" / "mt.pt", tmp_path / "eval-wrong"))
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr and len(wrong.stderr.strip().splitlines()) == 1
    assert f"--fine-tune-mode '{mode}' in the checkpoint, 'full-model' given" in wrong.stderr


def test_merge_needs_adapters(tmp_path, course_data, tiny_model):
    with pytest.raises(MinbertError, match="--merge folds LoRA/DoRA"):
        mt.main(part2_args(tmp_path, course_data, tiny_model, "--merge"))


def test_classifier_adapters_with_merge(tmp_path, course_data, tiny_model, capsys):
    """Part 1 --merge: the same run with and without it (fp32, one seed) writes the same predictions; CFIMDB at
    this learning rate gives the adapters something to learn, so the predictions are not one label, and a merge
    that dropped or double-counted the adapters would show. (DoRA barely moves in this budget on the tiny model;
    its merge is pinned by the STS scores of the multitask test above, which need no learned labels.)"""
    mode = "lora"
    def run(name, *extra):
        return classifier.main(part1_args(
            tmp_path / name, course_data, tiny_model, "--epochs", "6", "--datasets", "cfimdb", "--fine-tune-mode", mode,
            "--lr", "1e-2", "--amp", "none", "--hidden_dropout_prob", "0", "--scheduler", "constant", "--max_grad_norm",
            "0", "--lora_targets", "query,value,interm_dense,out_dense", "--lora_alpha", "32", *extra))
    unmerged = run("plain")
    assert "merged" not in capsys.readouterr().out
    results = run("merged", "--merge")
    out = capsys.readouterr().out
    assert "merged 8 adapters" in out and "trainable parameters" in out  # 2 layers x 4 targets
    assert results[0]["dev_acc"] == unmerged[0]["dev_acc"]
    for split in ("dev", "test"):
        a, b = ((tmp_path / name / "pred" / f"{mode}-cfimdb-{split}-out.csv").read_text() for name in ("plain", "merged"))
        assert a == b
    labels = {line.split(" , ")[1] for line in a.splitlines()[1:]}
    assert len(labels) == 2, "the adapters learned nothing: the comparison would not tell a merge from none"
    saved = torch.load(tmp_path / "merged" / "ck" / f"{mode}-cfimdb.pt", weights_only=True)["model"]
    assert all(k.startswith("classifier.") or k.split(".")[-1] in ("lora_A", "lora_B", "magnitude") for k in saved)


@pytest.mark.parametrize("mode, extra", [("adapter", ["--adapter_dim", "4"]), ("prefix", ["--prefix_length", "3"])])
def test_adapter_and_prefix_modes_end_to_end(tmp_path, course_data, tiny_model, mode, extra):
    # fp32: the --merge comparison below is the prefix fold's algebra, not rounding (see the LoRA test above)
    args = part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--amp", "none", "--fine-tune-mode", mode, *extra)
    mt.main(args)
    saved = torch.load(tmp_path / "ck" / "mt.pt", weights_only=True)
    assert saved["spec"]["fine_tune_mode"] == mode
    bert_keys = [k for k in saved["model"] if k.startswith("bert.")]
    assert bert_keys and all((".down." in k or ".up." in k or "layer_norm" in k) if mode == "adapter"
                             else k.startswith("bert.prefix_tuning.") for k in bert_keys)
    before = output_files(tmp_path / "pred")
    # the mode and its settings come from the checkpoint
    again = [a for a in part2_args(tmp_path, course_data, tiny_model, "--amp", "none") if a not in ("--fine-tune-mode", "full-model")]
    mt.main(eval_only_args(again, tmp_path / "ck" / "mt.pt", tmp_path / "eval") + (["--merge"] if mode == "prefix" else []))
    after = output_files(tmp_path / "pred")
    for name in before:
        if name.startswith("sts"):
            a = [float(l.split(" , ")[1]) for l in before[name].splitlines()[1:]]
            b = [float(l.split(" , ")[1]) for l in after[name].splitlines()[1:]]
            assert np.allclose(a, b, atol=2e-4)
        else:
            assert before[name] == after[name]
