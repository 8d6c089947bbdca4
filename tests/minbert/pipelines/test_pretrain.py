"""pipelines/pretrain.py: pretraining learns and its folder reloads everywhere; a resumed run equals an uninterrupted
one to the bit (losses, held-out scores, weights); an interrupted or killed first epoch is no dead end."""
import json

import pytest
import torch

import classifier
import multitask_classifier as mt
import pretrain
from bert import BertModel
from minbert.tasks.mlm import BertForMaskedLM, IGNORE
from tests.course import part1_args, part2_args, pretrain_args
from tests.processes import epochs_run, interrupt_second_epoch
from utils import MinbertError


def test_pretraining_learns_and_the_folder_reloads(tmp_path, tiny_model, course_data, capsys):
    out = pretrain.main(pretrain_args(tmp_path, tiny_model, tmp_path / "mlm", "--epochs", "4"))
    log = [json.loads(l) for l in (out / "pretrain-log.jsonl").read_text().splitlines()]
    accs = [r["dev"]["masked_acc"] for r in log]
    assert [r["epoch"] for r in log] == [-1, 0, 1, 2, 3] and accs[-1] > accs[0] + 0.1  # a random model learns
    printed = capsys.readouterr().out
    assert "MLM head fresh" in printed and f"use it with --pretrained {out}" in printed
    assert {p.name for p in out.iterdir()} >= {"config.json", "vocab.txt", "model.safetensors"}
    # the folder reloads with identical outputs: the encoder, and the head (loaded, not fresh)
    trained, had = BertForMaskedLM.from_pretrained(out)
    assert had
    ids = torch.randint(5, 40, (2, 9))
    mask = torch.ones_like(ids)
    bert = BertModel.from_pretrained(out).eval()
    trained.eval()
    torch.testing.assert_close(bert(ids, mask)["last_hidden_state"], trained.bert(ids, mask)["last_hidden_state"],
                               rtol=0, atol=0)
    labels = torch.full_like(ids, IGNORE)
    labels[:, 3] = ids[:, 3]
    again, _ = BertForMaskedLM.from_pretrained(out)
    again.eval()
    torch.testing.assert_close(trained(ids, mask, labels)[1], again(ids, mask, labels)[1], rtol=0, atol=0)
    # every script loads it as --pretrained
    classifier.main(part1_args(tmp_path / "part1", course_data, out, "--epochs", "1", "--datasets", "sst"))
    mt.main(part2_args(tmp_path / "part2", course_data, out, "--epochs", "1"))  # a run folder is one pipeline's


def test_resume_equals_an_uninterrupted_run_and_keeps_the_step_budget(tmp_path, tiny_model, monkeypatch):
    """--max_steps 20 over 3 epochs of 15 steps: 15 + 5 steps, then stop; interrupted in the second epoch and
    resumed, the run trains only that epoch, its 5 steps, and ends with the straight run's weights."""
    from safetensors.torch import load_file
    budget = ("--epochs", "3", "--max_steps", "20")
    straight = pretrain.main(pretrain_args(tmp_path, tiny_model, tmp_path / "straight", *budget))
    restore = interrupt_second_epoch(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        pretrain.main(pretrain_args(tmp_path, tiny_model, tmp_path / "resumed", *budget))
    restore()
    with pytest.raises(MinbertError, match="already holds a run.*add --resume"):
        pretrain.main(pretrain_args(tmp_path, tiny_model, tmp_path / "resumed", *budget))
    with pytest.raises(MinbertError, match="cannot resume.*--lr"):
        pretrain.main(pretrain_args(tmp_path, tiny_model, tmp_path / "resumed", *budget, "--resume", "--lr", "1e-3"))
    trained = epochs_run(monkeypatch)
    resumed = pretrain.main(pretrain_args(tmp_path, tiny_model, tmp_path / "resumed", *budget, "--resume"))
    assert trained == ["pretrain epoch 1"]
    logs = {}
    for run in (straight, resumed):
        logs[run] = [json.loads(l) for l in (run / "pretrain-log.jsonl").read_text().splitlines()]
        assert [(r["epoch"], r.get("steps"), r.get("total_steps")) for r in logs[run]] == [
            (-1, None, None), (0, 15, 15), (1, 5, 20)]
    # the resumed epoch's losses and held-out scores are the straight run's, to the bit
    same = ("train_loss", "dev", "lr")
    assert [[r.get(k) for k in same] for r in logs[resumed]] == [[r.get(k) for k in same] for r in logs[straight]]
    a, b = load_file(str(straight / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    a, b = (torch.load(run / "pretrain-last.pt", weights_only=True)["model"] for run in (straight, resumed))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # the last epoch's weights, not the best's


def test_an_interrupted_or_killed_first_epoch_is_no_dead_end(tmp_path, tiny_model, monkeypatch, capsys):
    from utils import main_guard
    restore = interrupt_second_epoch(monkeypatch)
    with pytest.raises(SystemExit):  # Ctrl-C in epoch 1: epoch 0 is saved, and the line says so
        main_guard(lambda: pretrain.main(pretrain_args(tmp_path, tiny_model, tmp_path / "a", "--epochs", "2")))
    restore()
    err = capsys.readouterr().err
    assert f"pretrain epoch 0 is saved in {tmp_path / 'a' / 'pretrain-last.pt'}" in err and "--resume" in err
    # killed during epoch 0 (kill -9: nothing saved but the starting point's log line): --resume starts again
    killed = tmp_path / "b"
    killed.mkdir()
    (killed / "pretrain-log.jsonl").write_text('{"epoch": -1}\n')
    with pytest.raises(MinbertError, match="already holds a run.*add --resume"):
        pretrain.main(pretrain_args(tmp_path, tiny_model, killed, "--epochs", "1"))
    out = pretrain.main(pretrain_args(tmp_path, tiny_model, killed, "--epochs", "1", "--resume"))
    assert "no completed epoch of pretrain" in capsys.readouterr().out
    log = [json.loads(l) for l in (out / "pretrain-log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [-1, 0]


def test_a_line_separator_inside_a_sentence_of_texts_stays_in_it(tmp_path):
    """--texts holds one sentence a line, lines ending at \\n: \\f, \\x85 or U+2028 inside one is text of it."""
    from types import SimpleNamespace

    from minbert.pipelines.pretrain import read_texts
    texts = tmp_path / "texts.txt"
    for char in ("\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"):
        texts.write_text(f"a good{char}film\r\nanother one\n", newline="")
        assert read_texts(SimpleNamespace(texts=str(texts), data_dir=None)) == [f"a good{char}film", "another one"]
