"""pipelines/pretrain.py: pretraining learns and its folder reloads everywhere; a resumed run equals an uninterrupted
one to the bit (losses, held-out scores, weights), with next-sentence prediction too; an interrupted or killed first
epoch is no dead end; --nsp's pairs go in as Part 2's cross-encoded pairs do, from --texts' documents or the
sonnets."""
import json
import re
from pathlib import Path

import pytest
import torch

import classifier
import multitask_classifier as mt
import pretrain
from bert import BertModel
from minbert.tasks.mlm import BertForMaskedLM, IGNORE
from tests.course import part1_args, part2_args, pretrain_args, pretrain_documents, real_data_folder
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
    # config.json names what the weights hold (the source's entry had been copied, naming heads not saved)
    assert json.loads((out / "config.json").read_text())["architectures"] == ["BertForMaskedLM"]
    # the folder reloads with identical outputs: the encoder, and the head (loaded, not fresh)
    trained, had = BertForMaskedLM.from_pretrained(out)
    assert had == {"mlm"}
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


def test_the_folder_loads_in_hf_transformers_with_the_same_outputs(tmp_path, tiny_model):
    """pretrain.py --nsp's folder is what BertForPreTraining saves: HF loads every tensor (none missing, none
    unexpected) and computes our masked-LM and next-sentence logits."""
    from transformers import BertForPreTraining
    out = pretrain.main(pretrain_args(tmp_path, tiny_model, tmp_path / "nsp", "--epochs", "1", "--max_steps", "2",
                                      "--nsp", "1", texts=pretrain_documents(tmp_path)))
    hf, info = BertForPreTraining.from_pretrained(out, output_loading_info=True)
    assert not any(info.values()), info
    assert json.loads((out / "config.json").read_text())["architectures"] == ["BertForPreTraining"]
    ours, had = BertForMaskedLM.from_pretrained(out, nsp=True)
    assert had == {"mlm", "nsp"}
    ids = torch.randint(5, 40, (2, 9))
    mask, types = torch.ones_like(ids), torch.zeros_like(ids)
    types[:, 5:] = 1
    labels = ids.clone()  # every position scored: the logits of every token
    with torch.no_grad():
        theirs = hf.eval()(input_ids=ids, attention_mask=mask, token_type_ids=types)
        mine = ours.eval()(ids, mask, labels, types)
    torch.testing.assert_close(mine.logits, theirs.prediction_logits.reshape(-1, ours.bert.config.vocab_size),
                               atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(mine.next_logits, theirs.seq_relationship_logits, atol=1e-5, rtol=1e-4)


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


def test_a_course_csv_given_as_texts_is_refused_not_read_as_sentences(tmp_path, course_data):
    """A course data file's header, ids and labels are no text to pretrain on: refused, naming its header line;
    a text whose first line merely holds a tab is read."""
    from types import SimpleNamespace

    from minbert.pipelines.pretrain import read_texts
    with pytest.raises(MinbertError, match=r"ids-sst-train.csv: its first line is a course data file's header "
                                           r"\('id\\tsentence\\tsentiment'\): --texts takes plain text"):
        read_texts(SimpleNamespace(texts=str(course_data / "ids-sst-train.csv"), data_dir=None))
    texts = tmp_path / "texts.txt"
    texts.write_text("an id\tand a sentence\nanother one\n")
    assert read_texts(SimpleNamespace(texts=str(texts), data_dir=None)) == ["an id\tand a sentence", "another one"]


def test_resume_with_next_sentence_prediction_equals_an_uninterrupted_run(tmp_path, tiny_model, monkeypatch, capsys):
    """--nsp 1 on --texts documents: both terms in the log, both heads in the folder; interrupted in the second epoch
    and resumed, the log and the weights are the straight run's to the bit."""
    from safetensors.torch import load_file
    docs = pretrain_documents(tmp_path)
    budget = ("--epochs", "3", "--max_steps", "16", "--nsp", "1")
    straight = pretrain.main(pretrain_args(tmp_path, tiny_model, tmp_path / "straight", *budget, texts=docs))
    printed = capsys.readouterr().out
    assert re.search(r"\d+ pairs of spans \(\d+ held out, \d+% of them NotNext", printed) and "MLM head fresh (the checkpoint has none), NSP head fresh" in printed
    assert "NSP head fresh (the checkpoint has none); lr 0.003; " in printed  # the start line says the learning rate
    restore = interrupt_second_epoch(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        pretrain.main(pretrain_args(tmp_path, tiny_model, tmp_path / "resumed", *budget, texts=docs))
    restore()
    pretrain.main(pretrain_args(tmp_path, tiny_model, tmp_path / "resumed", *budget, "--resume", texts=docs))
    logs = [[json.loads(line) for line in (run / "pretrain-log.jsonl").read_text().splitlines()]
            for run in (straight, tmp_path / "resumed")]
    assert [r["epoch"] for r in logs[0]] == [-1, 0, 1] and {"nsp_acc", "nsp_loss"} <= logs[0][-1]["dev"].keys()
    terms = logs[0][-1]["loss_terms"]
    assert terms.keys() == {"mlm", "nsp"} and terms["mlm"] + terms["nsp"] == pytest.approx(logs[0][-1]["train_loss"])
    same = ("train_loss", "loss_terms", "dev", "lr")
    assert [[r.get(k) for k in same] for r in logs[1]] == [[r.get(k) for k in same] for r in logs[0]]
    a, b = (load_file(str(run / "model.safetensors")) for run in (straight, tmp_path / "resumed"))
    assert "cls.seq_relationship.weight" in a and a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert BertForMaskedLM.from_pretrained(straight, nsp=True)[1] == {"mlm", "nsp"}


def test_pairs_go_in_cross_encoded_with_token_types(tiny_model):
    """'[CLS] A [SEP] B [SEP]': token type 0 through the first [SEP], 1 after it, as Part 2's cross-encoded pairs;
    the next-sentence label moves beside the MLM labels, and [CLS] and [SEP] are never masked."""
    from minbert.pipelines.pretrain import as_pairs, masked
    from tokenizer import BertTokenizer
    tok = BertTokenizer.from_pretrained(tiny_model)
    data = as_pairs([("the movie is good", "it was fun", 0), ("a bad film", "i hate this", 1)], tok, 32)
    batch = next(masked(iter([data.batch([0, 1])]), tok, 100, 0.5, torch.Generator().manual_seed(0)))
    ids, types = data.inputs["x"][0][0], batch["x"]["token_type_ids"][0]
    cls, sep = tok.cls_token_id, tok.sep_token_id
    first_sep = ids.index(sep)
    assert ids[0] == cls and ids[-1] == sep and ids == tok.encode("the movie is good", "it was fun")
    assert types[:first_sep + 1].tolist() == [0] * (first_sep + 1) and types[first_sep + 1:len(ids)].tolist() == [1] * (len(ids) - first_sep - 1)
    assert batch["next_labels"].tolist() == [0, 1]
    specials = torch.isin(batch["x"]["input_ids"], torch.tensor([cls, sep, tok.pad_token_id]))
    assert (batch["labels"][specials] == IGNORE).all()



def test_the_next_sentence_term_trains_on_each_pairs_own_label(tiny_model):
    """Shuffled, bucketed batches keep each pair's label with it; AdamW steps on PretrainLoss's NSP term alone (MLM
    weighed out by choosing almost no token) bring it from chance (ln 2) to memorising a batch of 16 pairs."""
    from minbert.pipelines.pretrain import PretrainLoss, as_pairs, masked
    from tokenizer import BertTokenizer
    tok = BertTokenizer.from_pretrained(tiny_model)
    words = "the a movie film good bad great awful fun boring love hate is was it this and but not very".split()
    g = torch.Generator().manual_seed(0)
    sentence = lambda: " ".join(words[i] for i in torch.randint(len(words), (5,), generator=g))  # noqa: E731
    pairs = [(sentence(), sentence(), i % 2) for i in range(40)]
    data = as_pairs(pairs, tok, 32)
    for b in data.batches(16, shuffle=True, seed=3):
        assert b["labels"].tolist() == [pairs[i][2] for i in b["index"].tolist()]
    torch.manual_seed(0)
    model, _ = BertForMaskedLM.from_pretrained(tiny_model, nsp=True)
    loss_fn, optimizer = PretrainLoss(nsp=1.0), torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = next(masked(data.batches(16, shuffle=True, seed=3), tok, 100, 1e-6, torch.Generator().manual_seed(0)))
    for _ in range(60):
        loss = loss_fn(model.train(), batch)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    terms = loss_fn.pop_terms()
    assert terms["mlm"] == 0 and terms["nsp"] < 0.6
    model.eval()
    with torch.no_grad():
        assert loss_fn(model, batch) < 0.2


def test_the_sonnets_are_documents_of_their_lines(tmp_path, tiny_model):
    """--corpus sonnets: each sonnet a document, its lines the sentences (DATA_DIR/sonnets.txt)."""
    from types import SimpleNamespace

    from minbert.pipelines.pretrain import read_documents
    data = tmp_path / "data"
    data.mkdir()
    text = (real_data_folder("sonnets.txt") / "sonnets.txt").read_text()
    (data / "sonnets.txt").write_text(text[:text.index("\n5\n")])  # the title and sonnets 1-4
    docs = read_documents(SimpleNamespace(texts=None, corpus="sonnets", data_dir=str(data)))
    assert len(docs) == 4 and all(len(d) == 14 for d in docs)
    assert docs[0][0] == "From fairest creatures we desire increase,"
    out = pretrain.main(["--pretrained", str(tiny_model), "--data_dir", str(data), "--corpus", "sonnets", "--nsp",
                         "0.5", "--out", str(tmp_path / "s"), "--epochs", "1", "--max_steps", "2",
                         "--batch_size", "8", "--max_length", "32"])
    log = [json.loads(line) for line in (out / "pretrain-log.jsonl").read_text().splitlines()]
    assert log[-1]["total_steps"] == 2 and "nsp_acc" in log[-1]["dev"]


def test_held_out_text_that_gets_no_masked_token_is_one_line_before_training(tmp_path, tiny_model, capsys):
    """Forty two-word sentences: the two held out get no masked token at --mask_prob 0.05 (seed 11711), so their
    accuracy would be undefined and every epoch tie with the first: refused, nothing trained; at a --mask_prob
    that masks one, the run goes on, a note saying how little picks its best epoch."""
    texts = tmp_path / "two-words.txt"
    words = "good bad fun sad dog cat man woman".split()
    texts.write_text("".join([f"{a} {b}\n" for a in words for b in words if a != b][:40]))
    with pytest.raises(MinbertError, match=r"^the 2 held-out sentences get no masked token at --mask_prob 0.05, so the "
                                           r"held-out accuracy that picks the best epoch is undefined"):
        pretrain.main(pretrain_args(tmp_path, tiny_model, tmp_path / "none", "--mask_prob", "0.05", texts=texts))
    assert not list((tmp_path / "none").glob("*.pt"))
    out = pretrain.main(pretrain_args(tmp_path, tiny_model, tmp_path / "some", "--mask_prob", "0.99",
                                      "--max_steps", "1", texts=texts))
    log = [json.loads(l) for l in (out / "pretrain-log.jsonl").read_text().splitlines()]
    assert all(r["dev"]["masked_tokens"] >= 1 for r in log)
    tokens = log[0]["dev"]["masked_tokens"]
    assert (f"note: the held-out text holds {tokens} masked token(s), so its accuracy moves in steps of "
            f"{1 / tokens:.2f}") in capsys.readouterr().out


def test_next_sentence_accuracy_is_scored_on_the_pairs_unmasked(tiny_model):
    """The held-out NSP accuracy and loss do not change with --mask_prob (the pairs go in as they are), while the
    masked-token figures do."""
    from types import SimpleNamespace
    from minbert.pipelines.pretrain import as_pairs, evaluate
    from minbert.specs import Recipe, Runtime
    from tokenizer import BertTokenizer
    tok = BertTokenizer.from_pretrained(tiny_model)
    words = "the movie was good . it was very fun . the plot is bad .".split(" . ")
    pairs = [(words[i % 3], words[(i + 1) % 3], i % 2) for i in range(12)]
    data = as_pairs(pairs, tok, 32)
    model, _ = BertForMaskedLM.from_pretrained(tiny_model, nsp=True)
    scores = [evaluate(model, data, tok, SimpleNamespace(runtime=Runtime(), recipe=Recipe(lr=1e-3, seed=1), mask_prob=p))
              for p in (0.15, 0.9)]
    assert scores[0]["nsp_acc"] == scores[1]["nsp_acc"] and scores[0]["nsp_loss"] == pytest.approx(scores[1]["nsp_loss"])
    assert scores[0]["masked_tokens"] != scores[1]["masked_tokens"]


def test_training_text_too_short_to_mask_a_token_an_epoch_is_one_line(tmp_path, tiny_model):
    """Four distinct one-word sentences, three of them trained on: 3 maskable tokens; at --mask_prob 0.3 an epoch
    masks 0.9 of them on average, so its loss would mostly be undefined (shown as 0): refused before the model
    loads; at 0.34 (1.02) this check passes (and the held-out sentence's is the next)."""
    texts = tmp_path / "one-word.txt"
    texts.write_text("".join(f"{w}\n" for w in ("good", "bad", "fun", "sad")))
    with pytest.raises(MinbertError, match=r"^the training text holds 3 maskable token\(s\): at --mask_prob 0.3 an "
                                           r"epoch masks 0.9 of them on average"):
        pretrain.main(pretrain_args(tmp_path, tiny_model, tmp_path / "none", "--mask_prob", "0.3", texts=texts))
    with pytest.raises(MinbertError, match=r"^the 1 held-out sentences get no masked token at --mask_prob 0.34"):
        pretrain.main(pretrain_args(tmp_path, tiny_model, tmp_path / "n2", "--mask_prob", "0.34", texts=texts))


def test_without_out_the_checkpoint_is_the_run_folder_it_names(tmp_path, tiny_model, capsys, monkeypatch):
    """Without --out the run folder is a new one under runs/, and the checkpoint folder is that one, as the last
    line says: nothing lands in the folder the command was typed in (a user's config.json there stays)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "config.json").write_text('{"mine": true}\n')
    args = pretrain_args(tmp_path, tiny_model, "x", "--max_steps", "1")
    out = pretrain.main(args[:args.index("--out")] + args[args.index("--out") + 2:])
    assert out.parent == Path("runs") and out.name.startswith("pretrain-")  # relative to where it was typed
    assert {"config.json", "vocab.txt", "model.safetensors"} <= {p.name for p in out.iterdir()}
    assert f"use it with --pretrained {out}" in capsys.readouterr().out
    assert (tmp_path / "config.json").read_text() == '{"mine": true}\n' and not (tmp_path / "vocab.txt").exists()
    with pytest.raises(MinbertError, match=r"--out '': empty; give a value, or leave the flag out"):
        pretrain.main(pretrain_args(tmp_path, tiny_model, ""))
