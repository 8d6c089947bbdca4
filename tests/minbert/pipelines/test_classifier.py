"""pipelines/classifier.py: Part 1 end to end in both modes; last-linear-layer keeps BERT frozen; the model
learns an easy task; one seed, one set of predictions; a resumed run writes what an uninterrupted one does; each
epoch its own order; each leaderboard row its own example's prediction."""
import json
import re

import pytest
import torch

import classifier
import evaluation
from minbert.course_data import read_examples
from tests.course import part1_args
from tests.processes import DEVICES, device_flags, epochs_run, interrupt_second_epoch
from utils import MinbertError


@pytest.mark.parametrize("mode", ["last-linear-layer", "full-model"])
def test_both_modes_end_to_end(tmp_path, course_data, tiny_model, mode, capsys):
    results = classifier.main(part1_args(tmp_path, course_data, tiny_model, "--fine-tune-mode", mode))
    assert [r["dataset"] for r in results] == ["sst", "cfimdb"]
    out = capsys.readouterr().out
    for ds in ("sst", "cfimdb"):
        for split, src in (("dev", "dev"), ("test", "test-student")):
            path = tmp_path / "pred" / f"{mode}-{ds}-{split}-out.csv"
            assert str(path) in out  # the run says where its outputs went
            lines = path.read_text().splitlines()
            assert lines[0] == "id , Predicted_Sentiment"
            gold = read_examples(course_data / f"ids-{ds}-{src}.csv", ds, "test" if split == "test" else "dev")
            assert [l.split(" , ")[0] for l in lines[1:]] == [e.id for e in gold]  # every id, input order
            n_labels = 5 if ds == "sst" else 2
            assert all(0 <= int(l.split(" , ")[1]) < n_labels for l in lines[1:])
        log = (tmp_path / "ck" / f"{mode}-{ds}-log.jsonl").read_text().splitlines()
        records = [json.loads(l) for l in log]
        assert len(records) == 2 and {"f1", "accuracy", "train_accuracy"} <= set(records[0]["dev"])
        assert records[0]["dev_score"] == records[0]["dev"]["accuracy"] and "tokens_per_s" in records[0]
    # the dev accuracy the run reports is what the scorer finds in the file it wrote
    r = evaluation.score_file(tmp_path / "pred" / f"{mode}-sst-dev-out.csv", course_data / "ids-sst-dev.csv")
    assert r["accuracy"] == pytest.approx(results[0]["dev_acc"]) and not r["missing"]


def test_last_linear_layer_keeps_bert_frozen(tmp_path, course_data, tiny_model):
    from minbert.specs import ModelSpec
    m = classifier.BertSentimentClassifier(ModelSpec(pipeline="classifier", pretrained=str(tiny_model),
                                                     fine_tune_mode="last-linear-layer", dropout=[0.3]))
    assert not any(p.requires_grad for p in m.bert.parameters())
    assert all(p.requires_grad for p in m.classifier.parameters())
    classifier.main(part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst"))
    saved = torch.load(tmp_path / "ck" / "last-linear-layer-sst.pt", weights_only=True)["model"]
    assert set(saved) == {"classifier.weight", "classifier.bias"}  # the frozen backbone is not re-saved


def test_learns_on_an_easy_task(tmp_path, course_data, tiny_model):
    """CFIMDB sentences here carry their label's words: full fine-tuning must beat chance on dev (in fp32 on every
    CPU kind; the bf16 and fp16 paths have their own test in training/test_trainer.py)."""
    res = classifier.main(part1_args(tmp_path, course_data, tiny_model, "--fine-tune-mode", "full-model", "--lr", "3e-3",
                                "--amp", "none",
                                "--epochs", "6", "--datasets", "cfimdb", "--hidden_dropout_prob", "0.0",
                                "--scheduler", "constant", "--max_grad_norm", "0"))
    assert res[0]["dev_acc"] >= 0.75


def test_same_seed_same_predictions(tmp_path, course_data, tiny_model):
    a = part1_args(tmp_path / "a", course_data, tiny_model, "--fine-tune-mode", "full-model", "--datasets", "sst")
    b = part1_args(tmp_path / "b", course_data, tiny_model, "--fine-tune-mode", "full-model", "--datasets", "sst")
    classifier.main(a)
    classifier.main(b)
    for split in ("dev", "test"):
        name = f"full-model-sst-{split}-out.csv"
        assert (tmp_path / "a" / "pred" / name).read_text() == (tmp_path / "b" / "pred" / name).read_text()


@pytest.mark.parametrize("device", DEVICES)
def test_resume_after_interruption_equals_uninterrupted(tmp_path, course_data, tiny_model, monkeypatch, device):
    common = ("--fine-tune-mode", "full-model", "--datasets", "sst", "--epochs", "3", *device_flags(device))
    classifier.main(part1_args(tmp_path / "straight", course_data, tiny_model, *common))

    restore = interrupt_second_epoch(monkeypatch)
    args = part1_args(tmp_path / "resumed", course_data, tiny_model, *common, "--resume")
    with pytest.raises(KeyboardInterrupt):
        classifier.main(args)
    last = tmp_path / "resumed" / "ck" / "full-model-sst-last.pt"
    assert torch.load(last, weights_only=True)["epoch"] == 0
    assert not list((tmp_path / "resumed" / "ck").glob("*.tmp"))
    restore()
    trained = epochs_run(monkeypatch)
    classifier.main(args)
    assert trained == ["full-model-sst epoch 1", "full-model-sst epoch 2"]  # from the checkpoint, not from scratch
    log = [json.loads(l) for l in (tmp_path / "resumed" / "ck" / "full-model-sst-log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [0, 1, 2]
    for split in ("dev", "test"):
        name = f"full-model-sst-{split}-out.csv"
        assert (tmp_path / "resumed" / "pred" / name).read_text() == (tmp_path / "straight" / "pred" / name).read_text()
    with pytest.raises(MinbertError, match=r"another configuration: --lr"):
        classifier.main(args + ["--lr", "3e-4"])


def test_each_epoch_draws_its_own_order_and_a_resumed_run_draws_the_same(tmp_path, course_data, tiny_model):
    """The training batches of epoch e come from (seed, e): every epoch a new order over every example, and the
    same order again when a resumed run recomputes that epoch."""
    from minbert.flags.settings import classifier_settings, parse_classifier
    from minbert.pipelines.classifier import SentimentPipeline
    args = parse_classifier(part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst",
                                       "--fine-tune-mode", "full-model"))
    pipeline = SentimentPipeline(classifier_settings(args, log=lambda *_: None), "sst")

    def order(epoch):
        return [b["index"].tolist() for b in pipeline.batches(epoch)[0]]
    first, second = order(0), order(1)
    assert sorted(sum(first, [])) == sorted(sum(second, [])) == list(range(len(pipeline.data["train"])))
    assert first != second
    assert order(1) == second


def test_each_leaderboard_row_is_its_own_examples_prediction(tmp_path, course_data, tiny_model):
    """predict_dataset() writes, for every id of dev and test, the class the model gives that example run alone."""
    from types import SimpleNamespace
    from minbert.flags.settings import classifier_settings, parse_classifier
    from minbert.pipelines.classifier import SentimentPipeline, predict_dataset
    args = parse_classifier(part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst",
                                       "--fine-tune-mode", "full-model"))
    pipeline = SentimentPipeline(classifier_settings(args, log=lambda *_: None), "sst")
    model = pipeline.model.eval()
    with torch.no_grad():  # a head that tells the examples apart, so that a row given another's class shows
        x = pipeline.data["dev"].batch(range(len(pipeline.data["dev"])))["x"]
        centre = model.embed(**x).mean(0)
        model.classifier.weight.mul_(1000)
        model.classifier.bias.copy_(-model.classifier.weight @ centre)
    predict_dataset(model, pipeline.data, SimpleNamespace(folder=tmp_path, stem="sst"), "cpu")
    for split in ("dev", "test"):
        data = pipeline.data[split]
        with torch.no_grad():
            alone = {data.ids[i]: int(model.logits(data.batch([i])).argmax(-1)) for i in range(len(data))}
        written, _ = evaluation.read_predictions(tmp_path / f"sst-{split}-out.csv")
        assert len(set(alone.values())) > 1 and written == {i: float(c) for i, c in alone.items()}, split


def test_a_data_file_missing_for_the_second_data_set_stops_the_run_before_the_first_trains(
        tmp_path, course_data, tiny_model, monkeypatch):
    """CFIMDB's dev file a broken link: one line naming it, and SST (first in --datasets) never trained."""
    gone = course_data / "ids-cfimdb-dev.csv"
    gone.unlink()
    gone.symlink_to(tmp_path / "nowhere.csv")
    trained = epochs_run(monkeypatch)
    with pytest.raises(MinbertError, match=rf"^{gone}: is a broken link \(its target is missing\), not a regular file"):
        classifier.main(part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst", "cfimdb"))
    assert trained == []


@pytest.mark.parametrize("content, said", [
    (b"id\tsentence\n", "no examples"),  # a header only
    (b"id\tsentence\tsource\n1\ta film .\tweb\n", "unexpected column 'source'"),
    (b"id\tsentence\ncaf\xe9\tun film .\n", "line 2"),  # Latin-1, not UTF-8
])
def test_a_bad_file_of_the_second_data_set_stops_the_run_before_the_first_trains(
        tmp_path, course_data, tiny_model, monkeypatch, content, said):
    """Every data set's files are read and checked before the first one trains, not only found: a bad CFIMDB
    test file is one line naming it, SST never trained and nothing published."""
    bad = course_data / "ids-cfimdb-test-student.csv"
    bad.write_bytes(content)
    trained = epochs_run(monkeypatch)
    with pytest.raises(MinbertError, match=rf"^{bad}: .*{re.escape(said)}"):
        classifier.main(part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst", "cfimdb"))
    assert trained == [] and not (tmp_path / "pred").exists()
