"""datasets.py: the course files read with their quirks, bad rows and files named by file and line, every id
batched exactly once, length bucketing cutting the padding, fixed shapes keeping the predictions; Part 1's rows as
the starter takes them, batched as their dataset batches."""
import re

import numpy as np
import pytest
import torch

from datasets import SentimentRows, batch_indices, join_pair, pair_lengths, sentiment_rows
from minbert.course_data import TASKS, data_file, read_examples
from tests.checkpoints import WORDS
from tests.course import part1_args, part2_args, real_data_folder
from tests.processes import one_line_error, run_main
from tokenizer import BertTokenizer
from utils import MinbertError

SST_HEAD = "\tid\tsentence\tsentiment\n"


def _write(path, text):
    path.write_text(text)
    return path


# ----------------------------------------------------------------------------- reading and bad input

def test_reads_course_quirks(tmp_path):
    train = _write(tmp_path / "train.csv", SST_HEAD + "0\tab1\t A good movie .\t4\n1\tab2\t Bad .\t0\n")
    test = _write(tmp_path / "test.csv", "0\t\tid\tsentence\n1\t0.0\tcd1\t Fun .\n2\t1.0\tcd2\t Dull .\n")
    ex = read_examples(train, "sst", "train")
    assert [(e.id, e.texts, e.label) for e in ex] == [("ab1", ("A good movie .",), 4), ("ab2", ("Bad .",), 0)]
    ex = read_examples(test, "sst", "test")
    assert [(e.id, e.texts, e.label) for e in ex] == [("cd1", ("Fun .",), None), ("cd2", ("Dull .",), None)]
    quora = _write(tmp_path / "q.csv", "\tid\tsentence1\tsentence2\tis_duplicate\r\n0\tq1\tHow?\tWhy?\t1.0\r\n")
    assert read_examples(quora, "quora", "dev")[0].label == 1


@pytest.mark.parametrize("row, match", [
    ("0\tab1\t Good .\t\n", r"line 2 \(id ab1\): sentiment empty"),
    ("0\tab1\t Good .\tfour\n", r"line 2: sentiment 'four' is not a number"),
    ("0\tab1\t Good .\t2.5\n", r"line 2: sentiment '2.5' is not an integer"),
    ("0\tab1\t Good .\t5\n", r"line 2: sentiment '5' is outside 0..4"),
    ("0\tab1\t \t3\n", r"line 2 \(id ab1\): sentence empty"),
    ("0\tab1\t Good .\t3\textra\n", r"line 2: 5 fields but the header has 4"),
    ("0\tab1\t Good .\t3\n1\tab1\t Again .\t3\n", r"line 3: id ab1 already on line 2"),
])
def test_bad_rows_name_file_and_line(tmp_path, row, match):
    p = _write(tmp_path / "ids-sst-train.csv", SST_HEAD + row)
    with pytest.raises(MinbertError, match=match) as e:
        read_examples(p, "sst", "train")
    assert str(p) in str(e.value)


def test_bad_files(tmp_path):
    with pytest.raises(MinbertError, match="data file not found"):
        read_examples(tmp_path / "nope.csv", "sst", "train")
    p = _write(tmp_path / "t.csv", "\tid\tsentence\tsentiment\n0\tab\t Fine .\t3\n")
    with pytest.raises(MinbertError, match="test file with a label column 'sentiment'"):
        read_examples(p, "sst", "test")
    p = _write(tmp_path / "t2.csv", "\tid\tsentence\tguess\n0\tab\t Fine .\t3\n")
    with pytest.raises(MinbertError, match="unexpected column 'guess'"):
        read_examples(p, "sst", "test")
    p = _write(tmp_path / "t3.csv", "\tid\ttext\tsentiment\n")
    with pytest.raises(MinbertError, match=r"lacks column\(s\) \['sentence'\]"):
        read_examples(p, "sst", "train")


def test_pair_files_skip_broken_rows_loudly_but_dev_and_test_files_keep_them(tmp_path):
    head = "\tid\tsentence1\tsentence2\tis_duplicate\n"
    rows = "0\tq1\tHow?\tWhy?\t1.0\n1\tq2\t\"Broken?\t\n2\tq3\tA\tB\t0.0\n"
    logged = []
    ex = read_examples(_write(tmp_path / "quora-train.csv", head + rows), "quora", "train", log=logged.append)
    assert [e.id for e in ex] == ["q1", "q3"]
    assert len(logged) == 1 and "skipped 1 broken row" in logged[0] and "line 3 (id q2)" in logged[0]
    logged.clear()  # dev: the row is kept without a label, so it is predicted but not scored
    ex = read_examples(_write(tmp_path / "quora-dev.csv", head + rows), "quora", "dev", log=logged.append)
    assert [e.id for e in ex] == ["q1", "q2", "q3"] and ex[1].label is None and ex[1].texts[1] == ""
    assert "kept" in logged[0] and "line 3 (id q2)" in logged[0]
    t = _write(tmp_path / "quora-test.csv", "\tid\tsentence1\tsentence2\n0\tq1\tHow?\tWhy?\n1\tq2\t\"Broken?\n")
    logged.clear()
    ex = read_examples(t, "quora", "test", log=logged.append)
    assert [e.id for e in ex] == ["q1", "q2"] and ex[1].texts[1] == ""
    assert "kept" in logged[0]


@pytest.mark.parametrize("task, value, match", [
    ("sts", "5.5", "outside 0..5"), ("sts", "-0.1", "outside 0..5"), ("quora", "2.0", "outside 0..1"),
    ("quora", "0.5", "not an integer"),
])
def test_pair_label_ranges(tmp_path, task, value, match):
    col = TASKS[task].label_col
    p = _write(tmp_path / "f.csv", f"\tid\tsentence1\tsentence2\t{col}\n0\tx1\tA\tB\t{value}\n")
    with pytest.raises(MinbertError, match=match):
        read_examples(p, task, "train")


def test_every_shared_data_file_reads(tmp_path):
    folder = real_data_folder()
    counts = {(t, s): len(read_examples(data_file(folder, t, s), t, s, log=lambda *_: None))
              for t in TASKS for s in ("train", "dev", "test")}
    assert counts[("sst", "train")] == 8544 and counts[("sst", "dev")] == 1101 and counts[("sst", "test")] == 2210
    assert counts[("sts", "dev")] == 863 and counts[("cfimdb", "test")] == 488


# ----------------------------------------------------------------------------- batching

@pytest.mark.parametrize("shuffle, bucket", [(True, True), (True, False), (False, True), (False, False)])
def test_batches_cover_every_example_exactly_once(shuffle, bucket):
    lengths = np.random.default_rng(0).integers(3, 60, size=1003)
    batches = batch_indices(lengths, 32, shuffle, seed=4, bucket=bucket, chunk_batches=5)
    flat = np.concatenate(batches)
    assert sorted(flat.tolist()) == list(range(1003))
    assert all(len(b) == 32 for b in batches[:-1]) or shuffle


def test_bucketing_cuts_padding_and_stays_random():
    lengths = np.random.default_rng(0).integers(3, 60, size=2000)

    def pad(batches):
        return sum(len(b) * lengths[b].max() for b in batches) / lengths.sum() - 1
    plain = batch_indices(lengths, 32, True, seed=1, bucket=False)
    bucketed = batch_indices(lengths, 32, True, seed=1, bucket=True)
    assert pad(bucketed) < pad(plain) / 4
    other_epoch = batch_indices(lengths, 32, True, seed=2, bucket=True)
    assert [b.tolist() for b in bucketed] != [b.tolist() for b in other_epoch]


# ----------------------------------------------------------------------------- fetching data/


def test_a_byte_order_mark_is_read_as_none(tmp_path, course_data):
    """Excel's "CSV UTF-8" starts the file with a byte-order mark: the same examples as without it, and a
    prediction file saved that way scores the same."""
    from evaluation import read_predictions
    for name, task, split in (("ids-sst-dev.csv", "sst", "dev"), ("quora-train.csv", "quora", "train"),
                              ("sts-test-student.csv", "sts", "test")):
        plain = read_examples(course_data / name, task, split)
        bom = tmp_path / name
        bom.write_bytes(b"\xef\xbb\xbf" + (course_data / name).read_bytes())
        assert [(e.id, e.texts, e.label) for e in read_examples(bom, task, split)] == \
            [(e.id, e.texts, e.label) for e in plain]
    pred = tmp_path / "pred.csv"
    pred.write_bytes(b"\xef\xbb\xbfid , Predicted_Sentiment\nabc , 3\n")
    assert read_predictions(pred) == ({"abc": 3.0}, [])


def test_non_utf8_csv_names_file_and_line(tmp_path, course_data, tiny_model):
    p = course_data / "ids-sst-train.csv"
    lines = p.read_bytes().split(b"\n")
    lines[4] = lines[4].replace(b"the", b"caf\xe9", 1) if b"the" in lines[4] else lines[4] + b"\xe9"
    p.write_bytes(b"\n".join(lines))
    out = run_main("classifier.py", *part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst"), cwd=tmp_path)
    one_line_error(out, r"ids-sst-train.csv: line 5: byte 0xE9 is not UTF-8")


def test_padding_report(course_data, tiny_model):
    from minbert.course_data import read_examples
    from datasets import TaskData
    from tokenizer import BertTokenizer
    tok = BertTokenizer.from_pretrained(tiny_model)
    d = TaskData(read_examples(course_data / "ids-sst-train.csv", "sst", "train"), "sst", tok)
    assert d.padding_fraction(8, bucket=True) < d.padding_fraction(8, bucket=False)
    assert "with length bucketing" in d.describe_batches(8, True)


def test_fixed_shapes_change_the_widths_and_not_the_predictions(course_data, tiny_model):
    """Padded positions are masked out of attention and pooling: every prediction is the same (fp32), while
    every batch is one of a few widths."""
    from minbert.specs import ModelSpec
    from minbert.course_data import MULTITASK, data_file
    from datasets import load_multitask_data, set_pad_multiple
    from evaluation import model_eval_multitask
    from minbert.tasks.multitask import MultitaskBERT
    from tokenizer import BertTokenizer
    torch.manual_seed(0)
    paths = {t: {"dev": data_file(course_data, t, "dev")} for t in MULTITASK}
    for encoding in ("cross", "siamese"):
        data = load_multitask_data(paths, BertTokenizer.from_pretrained(str(tiny_model)), 40, encoding, ("dev",))["dev"]
        model = MultitaskBERT(ModelSpec(pretrained=str(tiny_model), pair_encoding=encoding, dropout=[0.1] * 3))
        plain = {}
        model_eval_multitask(model, data, 4, torch.device("cpu"), raw=plain)
        def widths():
            return [b[k]["input_ids"].shape[1] for d in data.values() for b in d.batches(4) for k in ("x", "a", "b") if k in b]
        unpadded = widths()
        set_pad_multiple(data, 8)  # the tiny sentences are short: 8 rather than 16 gives them several shapes
        padded = widths()
        assert all(w % 8 == 0 for w in padded) and len(set(padded)) < len(set(unpadded)) and padded != unpadded
        fixed = {}
        model_eval_multitask(model, data, 4, torch.device("cpu"), raw=fixed)
        for task in MULTITASK:
            torch.testing.assert_close(torch.as_tensor(fixed[task]), torch.as_tensor(plain[task]), rtol=1e-5, atol=1e-5)


def test_a_folder_given_for_a_file_is_said_to_be_one(tmp_path, course_data, tiny_model):
    """--sst_dev FOLDER and --extra_task snli=FOLDER name a path that exists: "not found" would mislead."""
    import multitask_classifier as mt
    for flag in (["--sst_dev", str(course_data)], ["--extra_task", f"snli={course_data}"]):
        with pytest.raises(MinbertError, match=rf"{re.escape(str(course_data))}: is a folder; give the .* itself"):
            mt.main(part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", *flag))


def test_fixed_shapes_fill_short_batches_with_rows_of_weight_0(course_data, tiny_model):
    """For CUDA graphs every batch has `rows` rows and one of a few widths; the real rows, weighted 1, are each example
    once, and predictions over such batches are the plain ones, one per example."""
    from datasets import set_fixed_shapes, task_dataset
    from evaluation import predict
    from minbert.tasks.multitask import MultitaskBERT
    from minbert.specs import ModelSpec
    from tokenizer import BertTokenizer
    examples = read_examples(data_file(course_data, "sts", "dev"), "sts", "dev")
    data = task_dataset(examples, "sts", BertTokenizer.from_pretrained(str(tiny_model)), 40, "siamese")
    model = MultitaskBERT(ModelSpec(pretrained=str(tiny_model), pair_encoding="siamese", dropout=[0.0] * 3)).eval()
    fn = lambda b: model.task_forward("sts", b).output  # noqa: E731
    plain = predict(fn, data, 5, torch.device("cpu"))
    set_fixed_shapes(data, 5)
    batches = list(data.batches(5, shuffle=True, seed=3))
    assert len(data) % 5 and {b["a"]["input_ids"].shape[0] for b in batches} == {5}
    assert {b[k]["input_ids"].shape[1] for b in batches for k in "ab"} <= set(data.widths)
    real = np.concatenate([b["index"][b["weight"] > 0].numpy() for b in batches])
    assert sorted(real) == list(range(len(data)))
    short = [b for b in batches if b["weight"].sum() < 5]
    assert len(short) == 1 and (short[0]["index"][short[0]["weight"] == 0] == short[0]["index"][0]).all()
    fixed = predict(fn, data, 5, torch.device("cpu"))
    assert fixed.shape == plain.shape
    np.testing.assert_allclose(fixed, plain, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------- two sentences joined into a pair

def test_a_pair_is_cut_as_the_tokenizer_cuts_it(tiny_model):
    from tokenizer import BertTokenizer
    tok = BertTokenizer.from_pretrained(str(tiny_model))
    for max_length in (9, 10):
        for n1 in range(1, 12):
            for n2 in range(1, 12):
                types = tok(" ".join(WORDS[:n1]), " ".join(WORDS[:n2]), max_length=max_length,
                            return_tensors=None)["token_type_ids"]
                kept = (types.count(0) - 2, types.count(1) - 1)
                assert pair_lengths(n1, n2, max_length - 3) == kept, (n1, n2, max_length)


def test_two_sentences_joined_from_their_real_tokens():
    ids1 = torch.tensor([[0, 2, 7, 8, 3], [2, 9, 3, 0, 0]])  # padding on either side, found by the masks
    ids2 = torch.tensor([[2, 5, 3], [2, 6, 3]])
    joined = join_pair(ids1, (ids1 != 0).long(), ids2, (ids2 != 0).long(), max_length=64, pad_id=0)
    assert joined["input_ids"].tolist() == [[2, 7, 8, 3, 5, 3], [2, 9, 3, 6, 3, 0]]
    assert joined["token_type_ids"].tolist() == [[0, 0, 0, 0, 1, 1], [0, 0, 0, 1, 1, 0]]
    assert joined["attention_mask"].tolist() == [[1] * 6, [1] * 5 + [0]]


def test_mixed_pairs_cross_encode_quora_and_keep_sts_siamese():
    from datasets import task_encoding
    assert [task_encoding("mixed", t) for t in ("quora", "sts")] == ["cross", "siamese"]
    assert [task_encoding(e, t) for e in ("cross", "siamese") for t in ("quora", "sts")] == \
        ["cross", "cross", "siamese", "siamese"]


def test_each_rank_gets_its_slice_of_a_global_batch_and_knows_its_size(course_data, tiny_model):
    """Two ranks share a global batch of 5: rank 0 rows 0, 2, 4, rank 1 rows 1, 3, each told the global 5 (what a
    loss averages over); a rank left without a row gets a stand-in of weight nothing ('ghost')."""
    from datasets import TaskData
    from tokenizer import BertTokenizer
    data = TaskData(read_examples(course_data / "ids-sst-train.csv", "sst", "train"), "sst",
                    BertTokenizer.from_pretrained(tiny_model))
    idx = np.array([7, 3, 9, 1, 4])
    parts = [data.rank_batch(idx, rank, 2) for rank in (0, 1)]
    assert [p["index"].tolist() for p in parts] == [[7, 9, 4], [3, 1]]
    assert [(p["global_size"], p["ghost"]) for p in parts] == [(5, False), (5, False)]
    lone = data.rank_batch(np.array([2]), 1, 2)
    assert (lone["global_size"], lone["ghost"]) == (1, True)


def test_a_few_unlabelled_dev_rows_keep_everyone_elses_labels(tiny_model):
    """Broken dev rows (label None) are predicted, not scored: the other rows keep their labels."""
    from datasets import TaskData
    from minbert.course_data import Example
    from tokenizer import BertTokenizer
    rows = [Example("a", ("good film",), 3, 2), Example("b", ("bad",), None, 3), Example("c", ("fun",), 1, 4)]
    data = TaskData(rows, "sst", BertTokenizer.from_pretrained(tiny_model))
    assert data.scored.tolist() == [True, False, True] and data.labels.tolist() == [3, 0, 1]
    none = TaskData([Example("b", ("bad",), None, 3)], "sst", BertTokenizer.from_pretrained(tiny_model))
    assert none.labels is None


def test_a_joined_pair_is_cut_to_max_length_with_its_three_special_tokens():
    """[CLS] a [SEP] b [SEP]: the two sentences share max_length - 3 tokens, so the row is max_length long."""
    a = torch.tensor([[2] + list(range(10, 30)) + [3]])
    b = torch.tensor([[2] + list(range(40, 60)) + [3]])
    out = join_pair(a, torch.ones_like(a), b, torch.ones_like(b), 12, 0)
    assert out["input_ids"].shape == (1, 12) and out["input_ids"][0].tolist().count(3) == 2
    assert out["input_ids"][0].tolist() == [2, *range(10, 14), 3, *range(40, 45), 3]  # 4 + 5 = 12 - 3, odd to b


def test_a_fetch_flag_without_fetch_is_refused_and_plain_help_is_not(capsys):
    """--from or --dest without --fetch would copy nothing: one line; no flag at all prints the usage."""
    import datasets
    for argv, flag in ((["--from", "/somewhere"], "--from"), (["--dest", "elsewhere"], "--dest")):
        with pytest.raises(MinbertError, match=rf"^{flag} belongs to --fetch: as given it would change nothing"):
            datasets.main(argv)
    datasets.main([])
    assert "--fetch" in capsys.readouterr().out


# ----------------------------------------------------------------------------- Part 1's rows, as the starter takes them

def test_sentiment_rows_read_the_task_the_file_name_says(tmp_path):
    """A CFIMDB file holds labels 0..1 and an SST file 0..4: a 3 is refused in the one and read in the other."""
    row = "0\tab1\t A good movie .\t3\n"
    with pytest.raises(MinbertError, match=r"ids-cfimdb-train.csv: line 2: sentiment '3' is outside 0..1"):
        sentiment_rows(_write(tmp_path / "ids-cfimdb-train.csv", SST_HEAD + row))
    assert sentiment_rows(_write(tmp_path / "ids-sst-train.csv", SST_HEAD + row)) == ([("A good movie .", 3, "ab1")], 5)
    assert sentiment_rows(tmp_path / "ids-sst-train.csv", "valid") == [("A good movie .", 3, "ab1")]
    test = _write(tmp_path / "ids-sst-test-student.csv", "0\t\tid\tsentence\n1\t0.0\tcd1\t Fun .\n")
    assert sentiment_rows(test, "test") == [("Fun .", "cd1")]


def test_sentiment_rows_batch_as_their_dataset_does(course_data, tiny_model):
    rows, _ = sentiment_rows(course_data / "ids-sst-train.csv")
    tokenizer = BertTokenizer.from_pretrained(str(tiny_model))
    data = SentimentRows(rows, "sst", tokenizer)
    picked = [rows[5], rows[0], rows[9]]
    batch, ours = data.collate_fn(picked), data.batch([5, 0, 9])
    assert torch.equal(batch["token_ids"], ours["x"]["input_ids"])
    assert torch.equal(batch["attention_mask"], ours["x"]["attention_mask"])
    assert batch["labels"].tolist() == [r[1] for r in picked] and batch["sent_ids"] == [r[2] for r in picked]
    unlabelled = SentimentRows([(s, i) for s, _, i in rows], "sst", tokenizer, labelled=False)
    assert "labels" not in unlabelled.collate_fn(unlabelled[:2]) and unlabelled.labels is None
    with pytest.raises(ValueError, match=r"row 0 has 2 fields: these rows are \(sentence, label, id\)"):
        SentimentRows(unlabelled.dataset, "sst", tokenizer)
