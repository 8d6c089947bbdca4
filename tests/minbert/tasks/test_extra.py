"""tasks/extra.py: SNLI/MultiNLI (.jsonl and .txt as released), SICK and PAWS files are read with their quirks, bad
files are one line naming file and line, and --extra_task trains each with a head of its own through the sampler."""
import json

import pytest
import torch

import multitask_classifier as mt
from minbert.tasks.extra import read_extra
from tests.course import part2_args
from utils import MinbertError

NLI_HEADER = ("gold_label\tsentence1_binary_parse\tsentence2_binary_parse\tsentence1_parse\tsentence2_parse\t"
              "sentence1\tsentence2\tcaptionID\tpairID\tlabel1\tlabel2\tlabel3\tlabel4\tlabel5")
PAIRS = [("a man is playing", "a man plays", "entailment"), ("the dog is good", "the cat is bad", "contradiction"),
         ("a woman is running", "a woman runs fast", "neutral"), ('a "quoted" film', "a film", "entailment"),
         ("the plot was fun", "it was boring", "-")]


def write_snli_jsonl(path, n=12):
    rows = [{"gold_label": PAIRS[i % 5][2], "sentence1": PAIRS[i % 5][0], "sentence2": PAIRS[i % 5][1],
             "pairID": f"p{i}", "annotator_labels": [PAIRS[i % 5][2]]} for i in range(n)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_mnli_txt(path, n=12):
    rows = [NLI_HEADER] + ["\t".join([PAIRS[i % 5][2], "( x )", "( y )", "(ROOT x)", "(ROOT y)", PAIRS[i % 5][0],
                                      PAIRS[i % 5][1], f"c{i}", f"m{i}", PAIRS[i % 5][2], "", "", "", ""]) for i in range(n)]
    path.write_text("\n".join(rows) + "\n")
    return path


def write_sick(path):
    head = "pair_ID\tsentence_A\tsentence_B\tentailment_label\trelatedness_score\tSemEval_set"
    rows = [f"{i}\t{a}\t{b}\tNEUTRAL\t{1 + i % 5}.0\t{['TRAIN', 'TRIAL', 'TEST'][i % 3]}" for i, (a, b, _) in
            enumerate(PAIRS * 2)]
    path.write_text("\n".join([head] + rows) + "\n")
    return path


def write_paws(path, n=10):
    rows = ["id\tsentence1\tsentence2\tlabel"] + [f"{i}\t{PAIRS[i % 5][0]}\t{PAIRS[i % 5][1]}\t{i % 2}" for i in range(n)]
    path.write_text("\n".join(rows) + "\n")
    return path


def test_each_format_reads_as_released(tmp_path, capsys):
    snli = read_extra("snli", write_snli_jsonl(tmp_path / "snli_1.0_train.jsonl"))
    assert len(snli) == 10 and {e.label for e in snli} == {0, 1, 2}  # the two '-' pairs skipped
    assert "2 pair(s) without a gold label ('-') skipped" in capsys.readouterr().out
    assert snli[3].texts == ('a "quoted" film', "a film")  # quotes are text
    mnli = read_extra("mnli", write_mnli_txt(tmp_path / "multinli_1.0_train.txt"))
    assert [(e.texts, e.label) for e in mnli] == [(e.texts, e.label) for e in snli]
    sick = read_extra("sick", write_sick(tmp_path / "SICK.txt"))
    assert len(sick) == 7 and all(1.0 <= e.label <= 5.0 for e in sick)  # TRAIN and TRIAL of 10 pairs
    assert "3 SICK pair(s) of the TEST set left out" in capsys.readouterr().out
    paws = read_extra("paws", write_paws(tmp_path / "train.tsv"))
    assert [e.label for e in paws] == [i % 2 for i in range(10)]


@pytest.mark.parametrize("char", ["\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\r"])
def test_a_line_break_character_inside_a_sentence_stays_in_it(tmp_path, char):
    """Rows end at \\n only: a form feed or a line separator inside a sentence is text of that sentence."""
    record = {"gold_label": "neutral", "sentence1": f"a{char}b", "sentence2": "c"}
    jsonl = tmp_path / "snli.jsonl"
    jsonl.write_text(json.dumps(record, ensure_ascii=False) + "\n" + json.dumps({**record, "sentence1": "d"}) + "\n",
                     newline="")
    assert [(e.texts, e.line) for e in read_extra("snli", jsonl)] == [((f"a{char}b", "c"), 1), (("d", "c"), 2)]
    tsv = tmp_path / "train.tsv"
    tsv.write_text(f"id\tsentence1\tsentence2\tlabel\n1\ta{char}b\tc\t1\n2\td\te\t0\n", newline="")
    assert [(e.texts, e.label, e.line) for e in read_extra("paws", tsv)] == [((f"a{char}b", "c"), 1, 2),
                                                                          (("d", "e"), 0, 3)]


@pytest.mark.parametrize("name, content, match", [
    ("snli", '{"gold_label": "maybe", "sentence1": "a", "sentence2": "b"}\n', r"line 1: gold_label 'maybe' is not one of"),
    ("snli", "not json\n", r"line 1: not a JSON object"),
    ("mnli", "gold_label\tsentence1\n", r"f.tsv: line 1: the header has no sentence2 column"),
    ("snli", '{"gold_label": "neutral", "sentence1": "a"}\n', r"line 1: no sentence2 \(is this a snli file\?\)"),
    ("paws", "id\tsentence1\tsentence2\tlabel\n1\ta\tb\t2\n", r"line 2: label '2' is not 0 or 1"),
    ("sick", "sentence_A\tsentence_B\trelatedness_score\na\tb\t7\n", r"line 2: relatedness_score '7' is outside 1..5"),
    ("paws", "id\tsentence1\tsentence2\tlabel\n", r"no paws training pairs"),
    ("snli", '{"gold_label": "neutral", "sentence1": null, "sentence2": "b"}\n', r"line 1: sentence1 is null, not a "
                                                                                r"sentence$"),  # not the text "None"
])
def test_bad_files_are_one_line_naming_file_and_line(tmp_path, name, content, match):
    path = tmp_path / ("f.jsonl" if content.startswith(("{", "not")) else "f.tsv")
    path.write_text(content)
    with pytest.raises(MinbertError, match=match):
        read_extra(name, path)


def test_flag_problems_are_one_line(tmp_path):
    with pytest.raises(MinbertError, match="--extra_task 'glue=x': unknown data set 'glue'"):
        mt.get_args(["--extra_task", "glue=x"])
    with pytest.raises(MinbertError, match="expected NAME=FILE"):
        mt.get_args(["--extra_task", "snli"])
    with pytest.raises(MinbertError, match="--extra_task 'snli= ': expected NAME=FILE"):  # a blank file name
        mt.get_args(["--extra_task", "snli= "])
    with pytest.raises(MinbertError, match="--extra_task ' =x': unknown data set ' '"):
        mt.get_args(["--extra_task", " =x"])
    with pytest.raises(MinbertError, match="snli given twice"):
        mt.get_args(["--extra_task", "snli=a", "snli=b"])
    with pytest.raises(MinbertError, match="snli given twice"):  # the flag typed twice: both lists act
        mt.get_args(["--extra_task", "snli=a", "--extra_task", "snli=b"])


def test_extra_tasks_train_through_the_sampler_with_heads_of_their_own(tmp_path, course_data, tiny_model):
    snli = write_snli_jsonl(tmp_path / "snli.jsonl")
    sick = write_sick(tmp_path / "SICK.txt")
    args = part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "10", "--sampler",
                      "round-robin", "--extra_task", f"snli={snli}", f"sick={sick}")
    trained = mt.main(args)
    log = json.loads((tmp_path / "ck" / "mt-log.jsonl").read_text().splitlines()[0])
    assert log["batches"] == {"sst": 2, "quora": 2, "sts": 2, "snli": 2, "sick": 2}
    assert {"snli", "sick"} <= set(log["loss_terms"])
    saved = torch.load(tmp_path / "ck" / "mt.pt", weights_only=True)
    assert saved["spec"]["extra_tasks"] == ["snli", "sick"]
    assert saved["model"]["extra_heads.snli.1.weight"].shape[0] == 3 and saved["model"]["extra_heads.sick.1.weight"].shape[0] == 1
    assert set(trained) == {"sst", "quora", "sts"}  # the dev mean stays the leaderboard's
    rescored = mt.main(part2_args(tmp_path, course_data, tiny_model, "--eval_only", str(tmp_path / "ck" / "mt.pt")))
    assert rescored == pytest.approx(trained)


def test_a_data_set_is_its_row_the_reader_applies_its_label_rule_and_its_filter(tmp_path, monkeypatch, capsys):
    """A new data set is one row of EXTRA_SETS: read_extra applies the row's label rule (a label, SKIP, or a
    ValueError that becomes the one line naming file and line) and its filter, and counts what each left out."""
    from minbert.course_data import Task
    from minbert.tasks import extra

    def stars(raw):  # 1-5 stars as two classes, 3 stars skipped
        if raw not in "12345" or len(raw) != 1:
            raise ValueError(f"stars {raw!r} is not 1 to 5")
        return extra.SKIP if raw == "3" else int(raw > "3")
    row = extra.ExtraSet(Task("toy", ("text", "other"), "stars", "class", 2), "toy.tsv", stars,
                         "with 3 stars skipped", use=lambda rec: rec.get("split") != "test",
                         left_out="test pair(s) left out")
    monkeypatch.setitem(extra.EXTRA_SETS, "toy", row)
    path = tmp_path / "toy.tsv"
    path.write_text("text\tother\tstars\tsplit\na\tb\t5\ttrain\nc\td\t3\ttrain\ne\tf\t1\ttest\ng\th\t2\ttrain\n")
    examples = extra.read_extra("toy", path)
    assert [(e.texts, e.label, e.line) for e in examples] == [(("a", "b"), 1, 2), (("g", "h"), 0, 5)]
    assert "2 training pairs from" in (out := capsys.readouterr().out) and "(1 pair(s) with 3 stars skipped; 1 test pair(s) left out)" in out
    path.write_text("text\tother\tstars\tsplit\na\tb\t5\ttrain\nc\td\t9\ttrain\n")
    with pytest.raises(MinbertError, match=r"toy.tsv: line 3: stars '9' is not 1 to 5$"):
        extra.read_extra("toy", path)
