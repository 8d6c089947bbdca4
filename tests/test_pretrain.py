"""pretrain.py and mlm.py: the masking rule, the written folder, resuming, and loading it everywhere."""
import json
import subprocess
import sys

import pytest
import torch

import classifier
import multitask_classifier as mt
import pretrain
from bert import BertModel
from minbert.tasks.mlm import BertForMaskedLM, IGNORE, mask_tokens
from tests.helpers import ROOT, interrupt_second_epoch, needs_minilm, part1_args, part2_args
from utils import MinbertError


def test_masking_rule_on_a_fixed_seed():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(10, 1000, (400, 50), generator=g)
    ids[:, 0], ids[:, -1], ids[:, 40:] = 2, 3, 0  # [CLS] ... [SEP] and padding
    special = (ids == 2) | (ids == 3) | (ids == 0)
    inputs, labels = mask_tokens(ids, special, 1000, mask_id=4, mask_prob=0.15, generator=g)
    chosen = labels != IGNORE
    assert not chosen[special].any() and torch.equal(inputs[special], ids[special])  # specials never touched
    assert torch.equal(labels[chosen], ids[chosen]) and (labels[~chosen] == IGNORE).all()
    assert torch.equal(inputs[~chosen], ids[~chosen])  # nothing outside the chosen ones changes
    n = int(chosen.sum())
    assert abs(n / int((~special).sum()) - 0.15) < 0.01
    masked = int((inputs[chosen] == 4).sum())
    kept = int((inputs[chosen] == ids[chosen]).sum())
    assert abs(masked / n - 0.8) < 0.02
    assert abs(kept / n - 0.1) < 0.02  # a random token equal to the original is rare here (1 in 1000)
    assert abs((n - masked - kept) / n - 0.1) < 0.02
    again = mask_tokens(ids, special, 1000, 4, 0.15, torch.Generator().manual_seed(0))
    g2 = torch.Generator().manual_seed(0)
    torch.randint(10, 1000, (400, 50), generator=g2)
    assert all(torch.equal(a, b) for a, b in zip(mask_tokens(ids, special, 1000, 4, 0.15, g2), (inputs, labels)))
    assert again[0].shape == ids.shape


def _texts(tmp_path, n=120):
    words = "the a movie film good bad great awful fun boring love hate is was it this and but not very".split()
    g = torch.Generator().manual_seed(1)
    lines = [" ".join(words[i] for i in torch.randint(len(words), (6,), generator=g).tolist()) for _ in range(n)]
    path = tmp_path / "texts.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(tmp_path, model, out, *extra):
    return pretrain.main(["--pretrained", str(model), "--texts", str(_texts(tmp_path)), "--out", str(out),
                          "--batch_size", "8", "--lr", "3e-3", "--max_length", "16", *extra])


def test_pretraining_learns_and_the_folder_reloads(tmp_path, tiny_model, course_data, capsys):
    out = _run(tmp_path, tiny_model, tmp_path / "mlm", "--epochs", "4")
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


def test_resume_equals_an_uninterrupted_run(tmp_path, tiny_model, monkeypatch):
    from safetensors.torch import load_file
    straight = _run(tmp_path, tiny_model, tmp_path / "straight", "--epochs", "2")
    restore = interrupt_second_epoch(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, tiny_model, tmp_path / "resumed", "--epochs", "2")
    restore()
    with pytest.raises(MinbertError, match="already holds a run.*add --resume"):
        _run(tmp_path, tiny_model, tmp_path / "resumed", "--epochs", "2")
    with pytest.raises(MinbertError, match="cannot resume.*--lr"):
        _run(tmp_path, tiny_model, tmp_path / "resumed", "--epochs", "2", "--resume", "--lr", "1e-3")
    resumed = _run(tmp_path, tiny_model, tmp_path / "resumed", "--epochs", "2", "--resume")
    a, b = load_file(str(straight / "model.safetensors")), load_file(str(resumed / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_max_steps_and_bad_input(tmp_path, tiny_model):
    out = _run(tmp_path, tiny_model, tmp_path / "short", "--epochs", "3", "--max_steps", "5")
    log = [json.loads(l) for l in (out / "pretrain-log.jsonl").read_text().splitlines()]
    assert log[-1]["total_steps"] == 5 and log[-1]["epoch"] == 0
    with pytest.raises(MinbertError, match="--texts file not found"):
        pretrain.main(["--pretrained", str(tiny_model), "--texts", str(tmp_path / "nope.txt"), "--out", str(tmp_path / "x")])


@needs_minilm
def test_pretrained_minilm_passes_sanity_check(tmp_path):
    """A few MLM steps on MiniLM (fresh head): the folder loads in sanity_check.py, checked against its own
    weights in NumPy."""
    out = _run(tmp_path, "all-minilm-l6-v2", tmp_path / "mini", "--epochs", "1", "--max_steps", "2")
    done = subprocess.run([sys.executable, "sanity_check.py", "--pretrained", str(out)], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Your BERT implementation is correct!" in done.stdout


def test_an_interrupted_or_killed_first_epoch_is_no_dead_end(tmp_path, tiny_model, monkeypatch, capsys):
    from utils import main_guard
    restore = interrupt_second_epoch(monkeypatch)
    with pytest.raises(SystemExit):  # Ctrl-C in epoch 1: epoch 0 is saved, and the line says so
        main_guard(lambda: _run(tmp_path, tiny_model, tmp_path / "a", "--epochs", "2"))
    restore()
    err = capsys.readouterr().err
    assert f"pretrain epoch 0 is saved in {tmp_path / 'a' / 'pretrain-last.pt'}" in err and "--resume" in err
    # killed during epoch 0 (kill -9: nothing saved but the starting point's log line): --resume starts again
    killed = tmp_path / "b"
    killed.mkdir()
    (killed / "pretrain-log.jsonl").write_text('{"epoch": -1}\n')
    with pytest.raises(MinbertError, match="already holds a run.*add --resume"):
        _run(tmp_path, tiny_model, killed, "--epochs", "1")
    out = _run(tmp_path, tiny_model, killed, "--epochs", "1", "--resume")
    assert "no completed epoch of pretrain" in capsys.readouterr().out
    log = [json.loads(l) for l in (out / "pretrain-log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [-1, 0]


def test_a_binary_texts_file_is_one_line(tmp_path, tiny_model):
    binary = tmp_path / "texts.bin"
    binary.write_bytes(b"good movie\n\xff\xfe\x00\x01 bytes")
    with pytest.raises(MinbertError, match=r"texts.bin: line 2: byte 0xFF is not UTF-8 text"):
        pretrain.main(["--pretrained", str(tiny_model), "--texts", str(binary), "--out", str(tmp_path / "x")])
