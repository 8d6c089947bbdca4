"""course_data.py: rows end at \\n only (a line separator inside a sentence stays in it), the course files' quirks
read, every problem named by file and line; a dev set its metric is undefined on is refused."""
import os
import re

import pytest

from minbert import course_data
from minbert.course_data import read_examples
from utils import MinbertError


# Characters str.splitlines breaks a line at but a CSV file does not end a row at.
NOT_ROW_ENDS = ["\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("char", NOT_ROW_ENDS, ids=[f"U+{ord(c):04X}" for c in NOT_ROW_ENDS])
def test_a_line_break_character_inside_a_sentence_stays_in_it(tmp_path, char):
    sst = tmp_path / "ids-sst-train.csv"
    sst.write_text(f"\tid\tsentence\tsentiment\n0\ta1\t Fine .\t3\n1\ta2\t A {char}lovely film .\t4\r\n2\ta3\t Dull .\t1\n")
    ex = course_data.read_examples(sst, "sst", "train")
    assert [(e.id, e.texts, e.label, e.line) for e in ex] == [
        ("a1", ("Fine .",), 3, 2), ("a2", (f"A {char}lovely film .",), 4, 3), ("a3", ("Dull .",), 1, 4)]
    quora = tmp_path / "quora-dev.csv"
    quora.write_text(f"\tid\tsentence1\tsentence2\tis_duplicate\n0\tq1\tHow{char}?\tWhy?\t1\n1\tq2\tA\tB\t0\n")
    ex = course_data.read_examples(quora, "quora", "dev", log=pytest.fail)
    assert [(e.id, e.texts, e.label) for e in ex] == [("q1", (f"How{char}?", "Why?"), 1), ("q2", ("A", "B"), 0)]
    bad = tmp_path / "ids-sst-dev.csv"  # a real error after the character is blamed on its own line
    bad.write_text(f"\tid\tsentence\tsentiment\n0\ta1\t A {char}film .\t3\n1\ta2\t Dull .\tfive\n")
    with pytest.raises(MinbertError, match=rf"{bad}: line 3: sentiment 'five' is not a number"):
        course_data.read_examples(bad, "sst", "dev")


def test_a_lone_carriage_return_is_named_on_its_line(tmp_path):
    path = tmp_path / "ids-sst-train.csv"
    path.write_text("\tid\tsentence\tsentiment\n0\ta1\t Fine .\t3\n1\ta2\t A\rfilm .\t4\n", newline="")
    with pytest.raises(MinbertError, match=r"line 3: a carriage return \(\\r\) inside the row; remove it"):
        course_data.read_examples(path, "sst", "train")
    path.write_text('\tid\tsentence\tsentiment\n0\ta1\t"A\rfilm ."\t4\n', newline="")  # quoted: text
    assert course_data.read_examples(path, "sst", "train")[0].texts == ("A\rfilm .",)


@pytest.mark.parametrize("rows, why", [
    (["0\ta\tx y\tx z\t3.0"], "1 labelled pair: Pearson r, its dev score, is undefined"),
    (["0\ta\tx y\tx z\t3.0", "1\tb\ty\tz\t3.0"], "2 labelled pairs, all scored 3: Pearson r"),
])
def test_a_dev_set_its_metric_is_undefined_on_is_one_line(tmp_path, rows, why):
    """Pearson r needs two different gold scores: a 1-pair or constant STS dev file is refused when read, never
    scored 0; two different scores, or the same rows as a training file, are taken."""
    path = tmp_path / "sts-dev.csv"
    path.write_text("\n".join(["\tid\tsentence1\tsentence2\tsimilarity", *rows]) + "\n")
    with pytest.raises(MinbertError, match=re.escape(f"{path}: {why}")):
        read_examples(path, "sts", "dev")
    assert len(read_examples(path, "sts", "train")) == len(rows)
    path.write_text("\n".join(["\tid\tsentence1\tsentence2\tsimilarity", rows[0], "1\tb\ty\tz\t2.5"]) + "\n")
    assert [e.label for e in read_examples(path, "sts", "dev")] == [3.0, 2.5]
    one = tmp_path / "ids-sst-dev.csv"  # accuracy is defined on one example
    one.write_text("\tid\tsentence\tsentiment\n0\ta1\t Fine .\t3\n")
    assert len(read_examples(one, "sst", "dev")) == 1


def test_a_data_dir_that_is_a_file_is_named_as_one(tmp_path):
    assert course_data.data_file(tmp_path, "sst", "dev") == tmp_path / "ids-sst-dev.csv"
    (tmp_path / "sts-dev.csv").write_text("id\tsentence1\tsentence2\tsimilarity\n")
    with pytest.raises(MinbertError, match=rf"^--data_dir {re.escape(str(tmp_path / 'sts-dev.csv'))}: a file, not "
                                           rf"the folder of the course's CSVs \(give its folder, "):
        course_data.data_file(tmp_path / "sts-dev.csv", "sst", "train")
    os.mkfifo(tmp_path / "pipe")  # a path that exists but is no folder: said to be what it is, not "not found"
    with pytest.raises(MinbertError, match=r"^--data_dir .*pipe: is a named pipe, not the folder of the course's "
                                           r"CSVs$"):
        course_data.data_file(tmp_path / "pipe", "sst", "train")


@pytest.mark.parametrize("split, body, match", [
    ("dev", "1,a2,spaces instead of tabs,2\n", r"ids-sst-dev.csv: line 3: empty id \(the line has 1 tab-separated "
                                              r"field, the header 4: is it tab-separated\?\)"),
    ("train", '1\ta2\t"A quote never closed .\t4\n', r"line 3 \(id a2\): sentiment empty \(an unbalanced quote \" "
                                                     r"swallows the fields after it: close or remove it\)"),
])
def test_a_malformed_line_is_named_with_what_is_wrong_with_it(tmp_path, split, body, match):
    """A line not tab-separated, and an unbalanced quote that swallows the fields after it: each named by file and
    line, with its likely cause."""
    path = tmp_path / f"ids-sst-{split}.csv"
    path.write_text("\tid\tsentence\tsentiment\n0\ta1\t A fine film .\t3\n" + body)
    with pytest.raises(MinbertError, match=match):
        read_examples(path, "sst", split)


def test_a_line_of_digits_inside_a_sonnet_is_a_line_of_it(tmp_path):
    """A sonnet's number follows a blank line; a line a model wrote that holds only digits ("8888") is text of
    its sonnet, not the start of another (a sonnet 8888 would be missing from every dev and test file)."""
    path = tmp_path / "generated_sonnets.txt"
    path.write_text("--Generated Sonnets--\n\n\n7\nShall I compare thee\n8888\nto a day\n\n12\nWhen I do count\n")
    assert course_data.read_sonnets(path) == [("7", "Shall I compare thee\n8888\nto a day"), ("12", "When I do count")]
    path.write_text("Sonnets\r\n\r\n1\r\n\r\nFrom fairest creatures\r\n\r\n2\r\nWhen forty winters\r\n")
    assert course_data.read_sonnets(path) == [("1", "From fairest creatures"), ("2", "When forty winters")]


def test_part_1s_task_is_the_one_a_files_name_says():
    assert course_data.sentiment_task("data/ids-cfimdb-dev.csv") == "cfimdb"
    assert course_data.sentiment_task("My-CFIMDB-reviews.csv") == "cfimdb"
    assert course_data.sentiment_task("data/ids-sst-dev.csv") == "sst"
    assert course_data.sentiment_task("reviews.csv") == "sst"  # SST's labels 0..4 hold CFIMDB's 0..1


@pytest.mark.parametrize("task, header, row, twice", [
    ("sts", "id\tsentence1\tsentence2\tsimilarity\tsimilarity", "s1\tA man .\tA dog .\t4.0\t0.0", "similarity"),
    ("sst", "\tid\tsentence\tsentence\tsentiment", "0\ta1\tGood .\tBad .\t3", "sentence"),
    ("sst", "id\tid\tsentence\tsentiment", "a1\ta2\tGood .\t3", "id"),
])
def test_a_column_named_twice_is_refused(tmp_path, task, header, row, twice):
    """Which of the two holds the data is unknowable: reading the first had dropped the other without a word."""
    path = tmp_path / f"{task}-dev.csv"
    path.write_text(f"{header}\n{row}\n")
    with pytest.raises(MinbertError, match=rf"line 1: column '{twice}' is named twice in the header; keep one$"):
        read_examples(path, task, "dev")
    # the other side: the course's unnamed pandas index columns may repeat (they are not read)
    path.write_text("\t\tid\tsentence\tsentiment\n0\t0\ta1\tGood .\t3\n1\t1\ta2\tBad .\t1\n")
    assert [e.label for e in read_examples(path, "sst", "dev")] == [3, 1]
