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
from pathlib import Path

from minbert.course_data import Example, Task
from minbert.files import require_file, text_lines
from utils import MinbertError, main_print

NLI_LABELS = ("entailment", "neutral", "contradiction")
EXTRA_TASKS = {
    "snli": Task("snli", ("sentence1", "sentence2"), "gold_label", "class", 3),
    "mnli": Task("mnli", ("sentence1", "sentence2"), "gold_label", "class", 3),
    "sick": Task("sick", ("sentence_A", "sentence_B"), "relatedness_score", "regression",
                 label_range=(1.0, 5.0)),
    "paws": Task("paws", ("sentence1", "sentence2"), "label", "class", 2),
}


def parse_extra(text):
    """'NAME=FILE' -> (name, path); a bad item is one line naming the flag."""
    name, sep, path = text.partition("=")
    if not sep or not path:
        raise MinbertError(f"--extra_task {text!r}: expected NAME=FILE, e.g. snli=snli_1.0_train.jsonl "
                           f"(NAME: {', '.join(EXTRA_TASKS)})")
    if name not in EXTRA_TASKS:
        raise MinbertError(f"--extra_task {text!r}: unknown data set "
                           f"{name!r}; choose from {', '.join(EXTRA_TASKS)}")
    return name, path


def _records(path, need):
    """(line number, {column: value}) of a .jsonl file (one JSON object a line) or a tab-separated file with a
    header (quotes are text, as in the released NLI files); a header without the columns `need` is refused."""
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise MinbertError(f"{path}: line {line}: byte 0x{raw[e.start]:02X} is not UTF-8 text") from None
    lines = text_lines(text)
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
    task, path = EXTRA_TASKS[name], Path(path)
    require_file(path, f"--extra_task {name}={path}", "file")
    examples, no_consensus, held_out = [], 0, 0
    need = (*task.text_cols, task.label_col)
    for n, rec in _records(path, need):
        missing = [c for c in need if c not in rec]
        if missing:
            raise MinbertError(f"{path}: line {n}: no {', '.join(missing)} (is this a {name} file?)")
        if (name == "sick" and "SemEval_set" in rec
                and str(rec["SemEval_set"]).strip().upper() not in ("TRAIN", "TRIAL")):
            held_out += 1
            continue
        texts = tuple(str(rec[c]).strip() for c in task.text_cols)
        if not all(texts):
            raise MinbertError(f"{path}: line {n}: an empty sentence")
        raw = str(rec[task.label_col]).strip()
        if name in ("snli", "mnli"):
            if raw == "-":
                no_consensus += 1
                continue
            if raw not in NLI_LABELS:
                raise MinbertError(f"{path}: line {n}: gold_label {raw!r} is not one of "
                                   f"{', '.join(NLI_LABELS)} or '-'")
            label = NLI_LABELS.index(raw)
        elif task.kind == "class":
            if raw not in ("0", "1"):
                raise MinbertError(f"{path}: line {n}: label {raw!r} is not 0 or 1")
            label = int(raw)
        else:
            try:
                label = float(raw)
            except ValueError:
                raise MinbertError(f"{path}: line {n}: relatedness_score {raw!r} is not a number") from None
            lo, hi = task.label_range
            if not lo <= label <= hi:
                raise MinbertError(f"{path}: line {n}: relatedness_score {raw!r} is outside {lo:g}..{hi:g}")
        examples.append(Example(str(rec.get("pairID", rec.get("pair_ID", rec.get("id", n)))), texts, label,
                                n))
    if not examples:
        raise MinbertError(f"{path}: no {name} training pairs in it")
    notes = ([f"{no_consensus} pair(s) without a gold label ('-') skipped"] if no_consensus else []) + (
        [f"{held_out} SICK pair(s) of the TEST set left out"] if held_out else [])
    main_print(f"--extra_task {name}: {len(examples)} "
               f"training pairs from {path}" + (f" ({'; '.join(notes)})" if notes else ""))
    return examples
