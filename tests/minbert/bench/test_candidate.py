"""bench/candidate.py: a row is built as its pipeline trains (our model with the fused AdamW, every switch off with
the reference loop and explicit attention, HF's with its Trainer's default AdamW) on the same batches, and its steps train."""
import pytest
import torch

from config import BertConfig
from minbert.bench.candidate import LR, Candidate, flops_per_batch
from minbert.specs import BenchSettings, Runtime
from tests.checkpoints import tiny_config, write_vocab
from tokenizer import BertTokenizer


def _settings(tmp_path, **kw):
    return BenchSettings(runtime=Runtime(), pretrained=None, config="tiny", data="synthetic", seq_len=16, batch_size=4,
                         steps=2, warmup=1, repeats=1, **kw)


def test_each_row_is_built_as_its_switches_say_and_trains(tmp_path):
    tok = BertTokenizer(write_vocab(tmp_path / "vocab.txt"))
    cfg = BertConfig(**{**tiny_config().to_dict(), "vocab_size": 30522})
    plain = Candidate(_settings(tmp_path), tok, cfg, "plain")
    baseline = Candidate(_settings(tmp_path), tok, cfg, "baseline", fast=False)
    hf = Candidate(_settings(tmp_path), tok, cfg, "hf", fast=False, hf=True)
    assert (plain.row["adamw"], baseline.row["adamw"]) == ("fused", "loop")
    # HF's row runs the AdamW its Trainer defaults to in the installed transformers (torch's fused kernel since 2.8)
    import transformers
    trainer_default = transformers.TrainingArguments.__dataclass_fields__["optim"].default
    assert hf.row["adamw"] == {"adamw_torch_fused": "torch-fused", "adamw_torch": "torch"}[trainer_default]
    assert hf.opt.defaults["fused"] == (trainer_default == "adamw_torch_fused")
    # HF with the attention its documentation recommends, chosen explicitly rather than left to its version's default
    assert (plain.row["attn"], baseline.row["attn"]) == ("sdpa", "explicit") and hf.row["attn"] == "sdpa (HF)"
    assert hf.model.config._attn_implementation == "sdpa"
    assert [b["x"]["input_ids"].shape for b in plain.batches] == [(4, 16)] * 3  # warm-up + timed steps
    assert torch.equal(plain.batches[0]["x"]["input_ids"], hf.batches[0]["x"]["input_ids"])  # the same batches
    before = [p.detach().clone() for p in plain.params]
    plain.train(True)
    plain.train_step(plain.batches[0])
    assert any(not torch.equal(a, p) for a, p in zip(before, plain.params))
    H, L, I, B, T = 32, 2, 64, 4, 16  # the tiny config: 2 per weight per token for the matmuls, plus attention
    assert flops_per_batch(cfg, plain.batches[0]) == B * T * L * (2 * (4 * H * H + 2 * H * I) + 4 * T * H)


def test_the_recorded_row_trains_on_fixed_shapes(tmp_path, course_data, tiny_model):
    """The row of the steps as the pipelines record them on a GPU (run eagerly on the CPU): every
    batch --batch_size rows, and a step moves the weights."""
    s = BenchSettings(runtime=Runtime(), pretrained=str(tiny_model), data="sst", data_dir=str(course_data), seq_len=64,
                      batch_size=5, steps=9, warmup=1, repeats=1)
    c = Candidate(s, BertTokenizer.from_pretrained(str(tiny_model)), BertConfig.from_json_file(
        str(tiny_model / "config.json")), "plain", record_step=True)
    assert c.row["recorded"] and {b["x"]["input_ids"].shape[0] for b in c.batches} == {5}
    assert any(b["weight"].sum() < 5 for b in c.batches)  # 48 examples: the last batch is filled
    assert sum(c.real) == sum(int(b["x"]["attention_mask"][b["weight"] > 0].sum()) for b in c.batches)
    before = [p.detach().clone() for p in c.params]
    c.train(True)
    c.train_step(c.batches[0])
    assert any(not torch.equal(a, p) for a, p in zip(before, c.params))
    c.train(False)
    assert c.infer_step(c.batches[0]).shape == (5, 32)


def test_our_rows_take_the_training_runs_optimizer_schedule_and_pals(tmp_path):
    """Our rows are optimised as a training run is (training/trainer.py build_trainer): the default recipe's linear
    schedule over the timed steps, and with --pals the PALs' weights among those that train."""
    tok = BertTokenizer(write_vocab(tmp_path / "vocab.txt"))
    cfg = BertConfig(**{**tiny_config().to_dict(), "vocab_size": 30522})
    plain = Candidate(_settings(tmp_path), tok, cfg, "plain")
    c = Candidate(_settings(tmp_path, pals=True), tok, cfg, "plain")
    own = {id(p) for p in [*c.model.parameters(), *c.head.parameters()]}
    pals = [p for p in c.params if id(p) not in own]
    assert pals and len(c.params) == len(plain.params) + len(pals)
    # 3 steps (1 warm-up + 2 timed), warm-up round(0.1 * 3) = 0 steps: the rate falls by a third a step
    assert c.opt.param_groups[0]["lr"] == pytest.approx(LR)
    before = [p.detach().clone() for p in pals]
    c.train(True)
    c.train_step(c.batches[0])
    assert c.opt.param_groups[0]["lr"] == pytest.approx(LR * 2 / 3)
    assert any(not torch.equal(a, p) for a, p in zip(before, pals))  # (the decoder starts at zero)


def test_a_random_models_messages_name_its_config_not_a_checkpoint(tmp_path):
    """--lora_rank above a random --config tiny model's hidden size: the refusal names --config tiny, not the
    bert-base-uncased a pipeline would load."""
    from utils import MinbertError
    tok = BertTokenizer(write_vocab(tmp_path / "vocab.txt"))
    cfg = BertConfig(**{**tiny_config().to_dict(), "vocab_size": 30522})
    with pytest.raises(MinbertError, match=r"--lora_rank 100: above the hidden size 32 of --config tiny, "):
        Candidate(_settings(tmp_path, fine_tune_mode="lora", lora_rank=100), tok, cfg, "plain")


def test_synthetic_ids_lie_within_the_models_vocabulary(tiny_model):
    """bench.py --data synthetic on a checkpoint of a small vocabulary: ids it has (they had been up to 20000)."""
    from minbert.bench.candidate import make_batches
    s = BenchSettings(runtime=Runtime(), pretrained=str(tiny_model), data="synthetic", seq_len=16, batch_size=4,
                      steps=2, warmup=0, repeats=1)
    for vocab in (99, 30522):
        ids = torch.cat([b["x"]["input_ids"] for b in make_batches(s, None, bucket=False, vocab_size=vocab)])
        assert int(ids.max()) < vocab and int(ids.min()) >= 0


def test_more_steps_than_the_data_holds_go_round_its_batches_and_say_so(tmp_path, course_data, tiny_model, capsys):
    """48 SST rows in batches of 16 are 3 batches: 1 warm-up and 6 timed steps run them in turn, with a line."""
    from minbert.bench.candidate import make_batches
    s = BenchSettings(runtime=Runtime(), pretrained=str(tiny_model), data="sst", data_dir=str(course_data), seq_len=64,
                      batch_size=16, steps=6, warmup=1, repeats=1)
    batches = make_batches(s, BertTokenizer.from_pretrained(str(tiny_model)), bucket=False, vocab_size=99)
    assert len(batches) == 7
    assert all(torch.equal(batches[i]["x"]["input_ids"], batches[i % 3]["x"]["input_ids"]) for i in range(7))
    assert "holds 3 batches of 16, fewer than the 7 steps asked for" in capsys.readouterr().out
