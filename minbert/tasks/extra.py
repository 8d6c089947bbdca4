"""Additional datasets trained jointly with Part 2's three tasks (handout 5.3, "Additional
Datasets"): `--extra_task NAME=FILE [NAME=FILE ...]`, each with a head of its own, its batches drawn
by the same sampler as SST's, Quora's and STS's (sampling.py). Their dev sets are not scored: the
dev mean stays the leaderboard's.

    NAME  data set                                   the file as released                      head
    snli  SNLI 1.0 (Bowman et al. 2015)               snli_1.0_train.jsonl, or snli_1.0_train.txt  3 classes
    mnli  MultiNLI 1.0 (Williams et al. 2018)         multinli_1.0_train.jsonl, or the .txt        3 classes
    sick  SICK relatedness (Marelli et al. 2014)      SICK.txt, or SemEval-2014's SICK_train.txt   score 1-5
    paws  PAWS (Zhang et al. 2019)                    PAWS-Wiki's train.tsv (also PAWS-QQP)        2 classes

NLI labels are entailment, neutral, contradiction; a pair whose annotators reached no consensus (gold_label
'-') is skipped, and one line counts them. From the full SICK.txt (its SemEval_set column present) only the
TRAIN and TRIAL pairs are used. Pairs are cross-encoded ('[CLS] a [SEP] b [SEP]'). Every problem with a file
is one line naming the file, the line and what is wrong.
"""
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from minbert.cli import MinbertError, main_print
from minbert.course_data import Example, Task
from minbert.files import read_text, require_file, text_lines

NLI_LABELS = ("entailment", "neutral", "contradiction")
SKIP = None  # what a label rule returns for a pair left out (counted in the line that reads the file)


def nli_label(raw):
    """An NLI gold label as its class; '-' (no annotator consensus) skipped."""
    if raw == "-":
        return SKIP
    if raw not in NLI_LABELS:
        raise ValueError(f"gold_label {raw!r} is not one of {', '.join(NLI_LABELS)} or '-'")
    return NLI_LABELS.index(raw)


def binary_label(raw):
    if raw not in ("0", "1"):
        raise ValueError(f"label {raw!r} is not 0 or 1")
    return int(raw)


def score_in(lo, hi):
    """A relatedness score as a number within lo..hi."""
    def label(raw):
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"relatedness_score {raw!r} is not a number") from None
        if not lo <= value <= hi:
            raise ValueError(f"relatedness_score {raw!r} is outside {lo:g}..{hi:g}")
        return value
    return label


def sick_training_pair(rec):
    """The full SICK.txt marks each pair's SemEval set: only TRAIN and TRIAL pairs train (SemEval-2014's
    SICK_train.txt has no such column: every pair)."""
    return "SemEval_set" not in rec or str(rec["SemEval_set"]).strip().upper() in ("TRAIN", "TRIAL")


@dataclass(frozen=True)
class ExtraSet:
    """One --extra_task data set: its task (columns, kind, classes), the file as released (--help says it),
    how a raw label becomes the task's (`label`: the label, SKIP, or a ValueError saying what is wrong), which
    records are training pairs (`use`), and what the line reading the file calls the pairs each rule left out."""
    task: Task
    release: str
    label: Callable
    skipped: str = ""
    use: Callable = lambda rec: True
    left_out: str = ""


SICK = Task("sick", ("sentence_A", "sentence_B"), "relatedness_score", "regression", label_range=(1.0, 5.0))
EXTRA_SETS = {
    "snli": ExtraSet(Task("snli", ("sentence1", "sentence2"), "gold_label", "class", 3),
                     ".jsonl or .txt as released", nli_label, "without a gold label ('-') skipped"),
    "mnli": ExtraSet(Task("mnli", ("sentence1", "sentence2"), "gold_label", "class", 3),
                     ".jsonl or .txt as released", nli_label, "without a gold label ('-') skipped"),
    "sick": ExtraSet(SICK, "SICK.txt", score_in(*SICK.label_range), use=sick_training_pair,
                     left_out="SICK pair(s) of the TEST set left out"),
    "paws": ExtraSet(Task("paws", ("sentence1", "sentence2"), "label", "class", 2), "train.tsv", binary_label),
}
EXTRA_TASKS = {name: s.task for name, s in EXTRA_SETS.items()}
EXTRA_HELP = ", ".join(f"{name} ({s.release})" for name, s in EXTRA_SETS.items())


def parse_extra(text):
    """'NAME=FILE' -> (name, path); a bad item is one line naming the flag."""
    name, sep, path = text.partition("=")
    if not sep or not path.strip():
        raise MinbertError(f"--extra_task {text!r}: expected NAME=FILE, e.g. snli=snli_1.0_train.jsonl "
                           f"(NAME: {', '.join(EXTRA_TASKS)})")
    if name not in EXTRA_TASKS:
        raise MinbertError(f"--extra_task {text!r}: unknown data set "
                           f"{name!r}; choose from {', '.join(EXTRA_TASKS)}")
    return name, path


def _records(path, need):
    """(line number, {column: value}) of a .jsonl file (one JSON object a line) or a tab-separated file with a
    header (quotes are text, as in the released NLI files); a header without the columns `need` is refused."""
    lines = text_lines(read_text(path, "data file"))
    if path.suffix == ".jsonl":
        for n, line in enumerate(lines, start=1):
            if line.strip():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    raise MinbertError(f"{path}: line {n}: not a JSON object "
                                       "(a .jsonl file holds one a line)") from None
                if not isinstance(rec, dict):
                    raise MinbertError(f"{path}: line {n}: not a JSON object "
                                       "(a .jsonl file holds one a line)")
                yield n, rec
        return
    rows = (line.split("\t") for line in lines)  # quotes are text, so a row's cells are its line's
    header = next(rows, None)
    if header is None or header == [""]:
        raise MinbertError(f"{path}: the file is empty")
    header = [h.strip() for h in header]
    missing = [c for c in need if c not in header]
    if missing:
        raise MinbertError(f"{path}: line 1: the header has no {', '.join(missing)} column")
    for n, row in enumerate(rows, start=2):
        if any(cell.strip() for cell in row):
            yield n, dict(zip(header, row))


def read_extra(name, path):
    """The training examples of extra data set `name` from `path` (see the table above)."""
    rules, path = EXTRA_SETS[name], Path(path)
    task = rules.task
    require_file(path, f"--extra_task {name}={path}", "file")
    examples, skipped, held_out = [], 0, 0
    need = (*task.text_cols, task.label_col)
    for n, rec in _records(path, need):
        missing = [c for c in need if c not in rec]
        if missing:
            raise MinbertError(f"{path}: line {n}: no {', '.join(missing)} (is this a {name} file?)")
        if not rules.use(rec):
            held_out += 1
            continue
        if any(not isinstance(rec[c], str) for c in task.text_cols):  # null, a number: str() would train on "None"
            bad = next(c for c in task.text_cols if not isinstance(rec[c], str))
            raise MinbertError(f"{path}: line {n}: {bad} is {json.dumps(rec[bad])}, not a sentence")
        texts = tuple(rec[c].strip() for c in task.text_cols)
        if not all(texts):
            raise MinbertError(f"{path}: line {n}: an empty sentence")
        try:
            label = rules.label(str(rec[task.label_col]).strip())
        except ValueError as e:
            raise MinbertError(f"{path}: line {n}: {e}") from None
        if label is SKIP:
            skipped += 1
            continue
        examples.append(Example(str(rec.get("pairID", rec.get("pair_ID", rec.get("id", n)))), texts, label,
                                n))
    if not examples:
        raise MinbertError(f"{path}: no {name} training pairs in it")
    notes = ([f"{skipped} pair(s) {rules.skipped}"] if skipped else []) + (
        [f"{held_out} {rules.left_out}"] if held_out else [])
    main_print(f"--extra_task {name}: {len(examples)} "
               f"training pairs from {path}" + (f" ({'; '.join(notes)})" if notes else ""))
    return examples
