"""classifier.py: bad input is one clear line that writes nothing; --use_gpu without a GPU and an unknown
--pretrained name are one line each. The starter's names work as its code calls them: its data loop on load_data and
the two datasets, model_eval and model_test_eval, save_model and test(args) (on save_model's file and on a run's
checkpoint), seed_everything and TQDM_DISABLE."""
import io
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader
from tqdm import tqdm

import classifier
from minbert.course_data import read_examples
from minbert.specs import ModelSpec
from optimizer import AdamW
from tests.course import part1_args
from tests.processes import run_main
from tokenizer import BertTokenizer
from utils import MinbertError


def cli(*args):
    return run_main("classifier.py", *args)


@pytest.mark.parametrize("break_it, match", [
    (lambda d: (d / "ids-sst-dev.csv").unlink(), r"ids-sst-dev.csv: data file not found"),
    (lambda d: d.joinpath("ids-sst-train.csv").write_text("\tid\tsentence\tsentiment\n0\ta1\t Fine .\t7\n"),
     r"ids-sst-train.csv: line 2: sentiment '7' is outside 0..4"),
    (lambda d: d.joinpath("ids-sst-train.csv").write_text("\tid\tsentence\tsentiment\n0\ta1\t Fine .\t\n"),
     r"ids-sst-train.csv: line 2 \(id a1\): sentiment empty"),
    (lambda d: d.joinpath("ids-sst-dev.csv").write_text("\tid\tsentence\tsentiment\n0\ta1\t Fine .\tx\n"),
     r"ids-sst-dev.csv: line 2: sentiment 'x' is not a number"),
    (lambda d: d.joinpath("ids-sst-train.csv").write_text("\tid\tsentence\tsentiment\n0\ta1\t  \t1\n"),
     r"ids-sst-train.csv: line 2 \(id a1\): sentence empty"),
    (lambda d: d.joinpath("ids-sst-test-student.csv").write_text("\tid\tsentence\tsentiment\n0\ta1\t Hi .\t1\n"),
     r"ids-sst-test-student.csv: line 1: a test file with a label column"),
    (lambda d: d.joinpath("ids-sst-test-student.csv").write_text("\tid\tsentence\n0\ta1\t Hi .\t1\n"),
     r"ids-sst-test-student.csv: line 2: 4 fields but the header has 3"),
])
def test_bad_input_is_one_clear_line_and_writes_nothing(tmp_path, course_data, tiny_model, break_it, match):
    break_it(course_data)
    out = cli(*part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst"))
    assert out.returncode == 2
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in out.stderr
    import re
    assert re.search(match, err[0]), err[0]
    assert not (tmp_path / "pred").exists() or not list((tmp_path / "pred").iterdir())


def test_use_gpu_without_gpu(tmp_path, course_data, tiny_model):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    out = cli(*part1_args(tmp_path, course_data, tiny_model, "--use_gpu"))
    assert out.returncode == 2 and "no GPU is visible" in out.stderr


def test_unknown_pretrained_name(tmp_path, course_data):
    out = cli(*part1_args(tmp_path, course_data, "bert-bsae-uncased"))
    assert out.returncode == 2 and "not a known name" in out.stderr


# ----------------------------------------------------------------------------- the starter's names, on tiny data

def starter_test_args(checkpoint, data, out):
    """The namespace the starter's __main__ gives test(args) for SST, its files under `out`."""
    return SimpleNamespace(filepath=checkpoint, dev=data / "ids-sst-dev.csv", test=data / "ids-sst-test-student.csv",
                           dev_out=out / "sst-dev.csv", test_out=out / "sst-test.csv", use_gpu=False, batch_size=8)


def by_hand(model, loader):
    """{id: predicted class} of `model` over a starter DataLoader, its forward called as the starter's loop calls it."""
    model.eval()
    with torch.no_grad():
        return {i: int(p) for b in loader for i, p in zip(b["sent_ids"], model(b["token_ids"], b["attention_mask"])
                                                           .argmax(-1))}


def predictions(path):
    return dict(line.split(" , ") for line in path.read_text().splitlines()[1:])


def test_the_starters_loop_runs_on_the_wrappers(tmp_path, course_data, tiny_model):
    """load_data, the two datasets in a DataLoader, a step of the starter's loop, model_eval and model_test_eval,
    save_model, then test(args) on the saved file: the same predictions everywhere."""
    rows, num_labels = classifier.load_data(course_data / "ids-sst-train.csv", "train")
    first = read_examples(course_data / "ids-sst-train.csv", "sst", "train")[0]
    assert num_labels == 5 and rows[0] == (first.texts[0], first.label, first.id)
    assert classifier.load_data(course_data / "ids-cfimdb-train.csv")[1] == 2
    dev = classifier.load_data(course_data / "ids-sst-dev.csv", "valid")
    test = classifier.load_data(course_data / "ids-sst-test-student.csv", "test")
    assert len(dev[0]) == 3 and len(test[0]) == 2
    args = classifier.get_args(part1_args(tmp_path, course_data, tiny_model))
    train = classifier.SentimentDataset(rows, args)
    assert train[0] == rows[0] and len(train) == len(rows)
    loader = DataLoader(train, shuffle=True, batch_size=8, collate_fn=train.collate_fn)
    batch = next(iter(loader))
    assert set(batch) == {"token_ids", "attention_mask", "labels", "sents", "sent_ids"}
    tokenizer = BertTokenizer.from_pretrained(str(tiny_model))
    for ids, mask, sentence in zip(batch["token_ids"], batch["attention_mask"], batch["sents"]):
        assert ids[mask.bool()].tolist() == tokenizer([sentence], return_tensors=None)["input_ids"][0]

    classifier.seed_everything(0)
    config = ModelSpec(pipeline="classifier", pretrained=str(tiny_model), fine_tune_mode="full-model",
                       num_labels=num_labels)
    model = classifier.BertSentimentClassifier(config)
    optimizer = AdamW(model.parameters(), lr=1e-3)
    loss = F.cross_entropy(model(batch["token_ids"], batch["attention_mask"]), batch["labels"].view(-1))
    loss.backward()
    optimizer.step()

    device = torch.device("cpu")
    dev_data = classifier.SentimentDataset(dev, args)
    dev_loader = DataLoader(dev_data, batch_size=8, collate_fn=dev_data.collate_fn)
    acc, f1, pred, gold, sents, ids = classifier.model_eval(dev_loader, model, device)
    assert dict(zip(ids, pred)) == by_hand(model, dev_loader)
    assert gold == [r[1] for r in dev] and sents == [r[0] for r in dev]
    assert acc == pytest.approx(sum(p == g for p, g in zip(pred, gold)) / len(dev))
    assert classifier.model_eval(dev_data, model, device)[:2] == (acc, f1)  # the dataset itself, as the loader's
    test_data = classifier.SentimentTestDataset(test, args)
    test_loader = DataLoader(test_data, batch_size=8, collate_fn=test_data.collate_fn)
    assert set(next(iter(test_loader))) == {"token_ids", "attention_mask", "sents", "sent_ids"}
    test_pred, _, test_ids = classifier.model_test_eval(test_loader, model, device)
    assert dict(zip(test_ids, test_pred)) == by_hand(model, test_loader)

    (tmp_path / "ck").mkdir()
    saved = classifier.save_model(model, optimizer, args, config, tmp_path / "ck" / "sst.pt")
    assert classifier.test(starter_test_args(saved, course_data, tmp_path / "out")) == pytest.approx(acc)
    assert predictions(tmp_path / "out" / "sst-dev.csv") == {i: str(p) for i, p in zip(ids, pred)}
    assert predictions(tmp_path / "out" / "sst-test.csv") == {i: str(p) for i, p in zip(test_ids, test_pred)}
    # a file save_model or test wrote is theirs to replace; one no command wrote is not
    classifier.save_model(model, optimizer, args, config, saved)
    classifier.test(starter_test_args(saved, course_data, tmp_path / "out"))
    (tmp_path / "ck" / "mine.pt").write_text("my notes\n")
    with pytest.raises(MinbertError, match=r"save_model's filepath .*mine.pt: "):
        classifier.save_model(model, optimizer, args, config, tmp_path / "ck" / "mine.pt")
    assert (tmp_path / "ck" / "mine.pt").read_text() == "my notes\n"


def test_test_rewrites_a_runs_predictions_from_its_checkpoint(tmp_path, course_data, tiny_model):
    classifier.main(part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst", "--epochs", "1"))
    out = tmp_path / "out"
    acc = classifier.test(starter_test_args(tmp_path / "ck" / "last-linear-layer-sst.pt", course_data, out))
    run = predictions(tmp_path / "pred" / "last-linear-layer-sst-dev-out.csv")
    assert predictions(out / "sst-dev.csv") == run
    assert predictions(out / "sst-test.csv") == predictions(tmp_path / "pred" / "last-linear-layer-sst-test-out.csv")
    gold = {e.id: str(e.label) for e in read_examples(course_data / "ids-sst-dev.csv", "sst", "dev")}
    assert acc == pytest.approx(sum(run[i] == g for i, g in gold.items()) / len(gold))


def test_test_takes_the_starters_namespace_and_never_writes_over_an_input(tmp_path, course_data, tiny_model):
    with pytest.raises(MinbertError, match=r"^test\(args\) takes the starter's namespace .* lacks filepath, dev, "):
        classifier.test(classifier.get_args(part1_args(tmp_path, course_data, tiny_model)))
    args = starter_test_args(tmp_path / "missing.pt", course_data, tmp_path / "out")
    with pytest.raises(MinbertError, match=r"missing.pt: checkpoint not found"):
        classifier.test(args)
    args.dev_out = course_data / "ids-sst-dev.csv"
    before = args.dev_out.read_text()
    with pytest.raises(MinbertError, match=r"^dev_out .*ids-sst-dev.csv: is the dev data file, which this run reads"):
        classifier.test(args)
    assert args.dev_out.read_text() == before and not (tmp_path / "out").exists()


def test_seed_everything_and_tqdm_disable_are_the_projects():
    classifier.seed_everything(5)
    a = torch.rand(3)
    classifier.seed_everything(5)
    assert torch.equal(torch.rand(3), a)
    classifier.seed_everything(6)
    assert not torch.equal(torch.rand(3), a)

    class Terminal(io.StringIO):
        def isatty(self):
            return True
    # a bar on a terminal, none in a log file, as every bar of the project
    assert not tqdm(range(2), disable=classifier.TQDM_DISABLE, file=Terminal()).disable
    assert tqdm(range(2), disable=classifier.TQDM_DISABLE, file=io.StringIO()).disable
