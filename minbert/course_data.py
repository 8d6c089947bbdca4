"""The course's data files: what each task's CSV holds (TASKS) and reading one with every problem named
(read_examples), and Build GPT-2's sonnets files (read_sonnets: its Part 2's data, and pretrain.py's
documents). Fetching them (`python datasets.py --fetch [--from DIR]`: from a local folder or $MINBERT_DATA,
else downloaded at a pinned commit of the course repository, each checked against its git blob id) is
course_files.py's."""
import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path

from minbert.cli import MinbertError, main_print
from minbert.files import read_text, require_file, special_file, text_lines

csv.field_size_limit(1 << 24)  # CFIMDB reviews are long

# The course's data folder, relative to the project folder, as the handout lays it out: every command's
# --data_dir default.
DATA_DIR = "data"


@dataclass(frozen=True)
class Task:
    name: str
    text_cols: tuple
    label_col: str
    kind: str          # 'class' (integer labels 0..num_labels-1) or 'regression' (float in label_range)
    num_labels: int = 0
    label_range: tuple = (0.0, 0.0)
    header: str = ""   # the leaderboard file's prediction column

    @property
    def is_pair(self):
        return len(self.text_cols) == 2


TASKS = {
    "sst": Task("sst", ("sentence",), "sentiment", "class", 5, header="Predicted_Sentiment"),
    "cfimdb": Task("cfimdb", ("sentence",), "sentiment", "class", 2, header="Predicted_Sentiment"),
    "quora": Task("quora", ("sentence1", "sentence2"), "is_duplicate", "class", 2,
                  header="Predicted_Is_Paraphrase"),
    "sts": Task("sts", ("sentence1", "sentence2"), "similarity", "regression", label_range=(0.0, 5.0),
                header="Predicted_Similarity"),
}


# Part 2's tasks, and the handout's prefix of each in flag and file names
# (--para_dev_out, para-dev-output.csv).
MULTITASK = ("sst", "quora", "sts")
TASK_PREFIX = {"sst": "sst", "quora": "para", "sts": "sts"}


@dataclass
class Example:
    id: str
    texts: tuple
    label: object  # int, float, or None for test files
    line: int


def _is_index_column(name):
    # The course's test-student files begin with pandas index columns named '' or a number.
    return name.strip() == "" or name.strip().lstrip("-").replace(".", "", 1).isdigit()


def require_data_file(path, flag=None):
    """One line unless the course data file `path` is there to read (a run checks all of its files before its
    first step, so that a file missing for its second data set is not found only after the first trained).
    `flag`: the flag the user typed to name it, which the line then names (and setup.sh is no remedy)."""
    if flag:
        require_file(path, f"{flag} {path}", "data file")
    else:
        require_file(path, str(path), "data file", "run setup.sh, or pass --data_dir")


def read_examples(path, task, split, log=None):
    """Read one course CSV for `task` ('sst', ...) and `split` ('train', 'dev' or 'test').

    Every problem names the file and line. Pair files (Quora, STS) really contain rows broken by an
    unbalanced quote, with a sentence or the label missing: in train files such rows are skipped and
    counted in one printed line; in dev and test files they are kept, with the missing sentence empty
    and the label None (the leaderboard wants a prediction for every id; scores leave them out).
    Wrong values (a label that is not a number, out of range, an empty sentence of a single-sentence
    task) are errors.
    """
    task = TASKS[task] if isinstance(task, str) else task
    log = log or main_print
    path = Path(path)
    require_data_file(path)
    labelled = split != "test"
    lines = text_lines(read_text(path, "data file"))
    if not lines:
        raise MinbertError(f"{path}: the file is empty")
    # One record per physical line, each parsed on its own: with a whole-file csv reader an unbalanced
    # quote would swallow every following line into one field and lose those rows without a word.
    def parse(line, text):
        try:
            return next(csv.reader([text], delimiter="\t"), [])
        except csv.Error as e:  # a lone carriage return outside quotes, which csv takes for a row's end
            why = ("a carriage return (\\r) inside the row; remove "
                   "it (or save the file with \\n line endings)"
                   if "\r" in text else str(e))
            raise MinbertError(f"{path}: line {line}: {why}") from None

    header = [h.strip() for h in parse(1, lines[0])]
    need = ["id", *task.text_cols] + ([task.label_col] if labelled else [])
    missing = [c for c in need if c not in header]
    if missing:
        raise MinbertError(f"{path}: line 1: header {header} lacks "
                           f"column(s) {missing} for {task.name} {split}")
    twice = next((c for i, c in enumerate(header) if c in header[:i] and not _is_index_column(c)), None)
    if twice:  # which of the two holds the data? reading the first would drop the other without a word
        raise MinbertError(f"{path}: line 1: column {twice!r} is named twice in the header; keep one")
    allowed = set(need) | ({task.label_col} if not labelled else set())
    for c in header:
        if c not in allowed and not _is_index_column(c):
            raise MinbertError(f"{path}: line 1: unexpected column {c!r} in a {task.name} {split} file "
                               "(expected id, "
                               f"{', '.join(task.text_cols)}" + (f", {task.label_col})" if labelled else ")"))
    if not labelled and task.label_col in header:
        raise MinbertError(f"{path}: line 1: a test file with a label column {task.label_col!r}: "
                           f"pass it as a dev file instead")
    col = {c: header.index(c) for c in need}
    examples, skipped, kept_broken, seen = [], [], [], {}
    for line, text in enumerate(lines[1:], start=2):
        row = parse(line, text)
        if not any(cell.strip() for cell in row):
            continue  # blank line at the end of a file
        if len(row) > len(header):
            raise MinbertError(f"{path}: line {line}: {len(row)} fields but the header has {len(header)} "
                               f"(values in an unexpected column)")
        get = lambda c: row[col[c]].strip() if col[c] < len(row) else ""
        ex_id = get("id")
        if not ex_id:
            fields = (f" (the line has {len(row)} tab-separated field{'s' if len(row) != 1 else ''}, the header "
                      f"{len(header)}: is it tab-separated?)" if len(row) < len(header) else "")
            raise MinbertError(f"{path}: line {line}: empty id{fields}")
        if ex_id in seen:
            raise MinbertError(f"{path}: line {line}: id {ex_id} already on line {seen[ex_id]}")
        seen[ex_id] = line
        texts = tuple(get(c) for c in task.text_cols)
        empty = [c for c, t in zip(task.text_cols, texts) if not t]
        if labelled and not get(task.label_col):
            empty.append(task.label_col)
        if empty:
            what = f"line {line} (id {ex_id}): {', '.join(empty)} empty"
            if text.count('"') % 2:  # the csv reader took everything after an opening quote as one field
                what += " (an unbalanced quote \" swallows the fields after it: close or remove it)"
            if not task.is_pair:
                raise MinbertError(f"{path}: {what}")
            (skipped if split == "train" else kept_broken).append(what)
            if split == "train":
                continue
        label = _parse_label(path, line, task,
                             get(task.label_col)) if labelled and get(task.label_col) else None
        examples.append(Example(ex_id, texts, label, line))
    if skipped:
        log(f"{path}: skipped {len(skipped)} broken row(s) with a missing field: " + "; ".join(skipped[:5])
            + (" ..." if len(skipped) > 5 else ""))
    if kept_broken:
        log(f"{path}: {len(kept_broken)} broken row(s) kept so that every id gets a prediction (a missing "
            f"sentence read as empty, a missing label left out of the score): " + "; ".join(kept_broken[:5]) + (" ..." if len(kept_broken) > 5 else ""))
    if not examples:
        raise MinbertError(f"{path}: no examples")
    if split == "dev":
        check_scorable(path, task, [e.label for e in examples if e.label is not None])
    return examples


def check_scorable(path, task, labels):
    """A dev set its task's metric is defined on, else one line: accuracy needs a labelled example, Pearson r
    two pairs of different gold scores (its correlation is undefined otherwise, not 0)."""
    if not labels:
        raise MinbertError(f"{path}: no labelled row, so its {task.name} dev score is undefined: give a dev "
                           "file with labels")
    if task.kind == "regression" and len(set(labels)) < 2:
        which = "1 labelled pair" if len(labels) == 1 else f"{len(labels)} labelled pairs, all scored {labels[0]:g}"
        raise MinbertError(f"{path}: {which}: Pearson r, its dev score, is undefined without two different gold "
                           "scores; give a dev file with more pairs")


def _parse_label(path, line, task, raw):
    try:
        value = float(raw)
    except ValueError:
        raise MinbertError(f"{path}: line {line}: {task.label_col} {raw!r} is not a number") from None
    if task.kind == "class":
        if not value.is_integer():
            raise MinbertError(f"{path}: line {line}: {task.label_col} {raw!r} is not an integer")
        if not 0 <= value < task.num_labels:
            raise MinbertError(f"{path}: line {line}: {task.label_col} "
                               f"{raw!r} is outside 0..{task.num_labels - 1}")
        return int(value)
    lo, hi = task.label_range
    if not (lo <= value <= hi) or math.isnan(value):
        raise MinbertError(f"{path}: line {line}: {task.label_col} {raw!r} is outside {lo:g}..{hi:g}")
    return value


def data_file(data_dir, task, split):
    """The course's file name for a task and split in the folder `data_dir` (one line when it is a file)."""
    if Path(data_dir).is_file():
        raise MinbertError(f"--data_dir {data_dir}: a file, not the folder of the course's CSVs (give its "
                           f"folder, {Path(data_dir).parent})")
    if Path(data_dir).exists() and not Path(data_dir).is_dir():  # a pipe, a device: "not found" below would mislead
        raise MinbertError(f"--data_dir {data_dir}: is {special_file(data_dir) or 'not a folder'}, not the folder "
                           "of the course's CSVs")
    prefix = {"sst": "ids-sst", "cfimdb": "ids-cfimdb", "quora": "quora", "sts": "sts"}[task]
    return Path(data_dir) / f"{prefix}-{'test-student' if split == 'test' else split}.csv"


def sentiment_task(path):
    """Part 1's task of a sentiment CSV: CFIMDB's where the file's name says so, else SST's (the two share their
    columns; SST's 0..4 is the wider label range)."""
    return "cfimdb" if "cfimdb" in Path(path).name.lower() else "sst"


def read_sonnets(path):
    """[(number, text)] of a sonnets file: each sonnet follows a line holding only its number, after a blank
    line (as in every course file and the handout's generated one: a line of digits inside a sonnet, which a
    model may write, is a line of it); what comes before the first number (the title page) is not a sonnet."""
    sonnets, number, lines, previous = [], None, [], ""
    # a line ends at \n only, as gpt2/sonnets.py's completion writes it
    for line in text_lines(read_text(path, "sonnets file")):
        header, previous = re.fullmatch(r"\s*\d+\s*", line) and not previous.strip(), line
        if header:
            if number is not None:
                sonnets.append((number, "\n".join(lines).strip("\n")))
            number, lines = line.strip(), []
        elif number is not None:
            lines.append(line.rstrip())
    if number is not None:
        sonnets.append((number, "\n".join(lines).strip("\n")))
    if not sonnets:
        raise MinbertError(f"{path}: no sonnets (each one follows a line holding its number)")
    return sonnets
