"""Course data in the course's layouts, the pipelines' command lines over it, and what a run leaves: its
output files, a finished Part 2 run folder, two finished runs' files published, a figure's size."""
import hashlib
import json
import struct
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

from evaluation import write_dev_scores, write_predictions
from minbert.course_data import data_file, read_examples
from minbert.runs.lock import RUN_MARK, RunLock
from minbert.runs.publishing import publish
from minbert.submit import split_of


ROOT = Path(__file__).resolve().parent.parent
PART2_FILES = [f"{t}-{s}-output.csv" for t in ("sst", "para", "sts") for s in ("dev", "test")]


SHARED_DATA = ROOT.parent / "shared" / "data"


def real_data_folder(name="sts-dev.csv"):
    """The folder of the course's data files (the CSVs; name="sonnets.txt" for the GPT-2 project's sonnets): data/ as
    setup.sh fills it, else ../shared/data beside the project (CI has one of them)."""
    folder = ROOT / "data" if (ROOT / "data" / name).exists() else SHARED_DATA
    assert (folder / name).exists(), f"no {name} in {ROOT / 'data'} or {SHARED_DATA}: run setup.sh"
    return folder


POS, NEG = "good great fun love funny".split(), "bad awful boring hate sad".split()


FILLER = "the movie film plot story acting actor is was it this and very so".split()


def _sentence(rng, label, n_labels):
    words = [rng.choice(FILLER) for _ in range(rng.randint(2, 9))]
    pool = POS if label >= n_labels / 2 else NEG
    for _ in range(1 + label % 2):
        words.insert(rng.randrange(len(words) + 1), rng.choice(pool))
    return " " + " ".join(words) + " ."


def write_course_data(folder, n_train=48, n_dev=16, n_test=12, seed=0):
    """Tiny files in the course's exact layouts: a leading index column with an empty name, the
    test-student files' two index columns, Quora's CRLF endings and 0.0/1.0 labels."""
    import random
    rng = random.Random(seed)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ids = iter(f"{rng.getrandbits(100):025x}" for _ in range(10 ** 6))
    for name, n_labels in (("ids-sst", 5), ("ids-cfimdb", 2)):
        for split, n in (("train", n_train), ("dev", n_dev)):
            rows = ["\tid\tsentence\tsentiment"]
            for i in range(n):
                y = rng.randrange(n_labels)
                rows.append(f"{i}\t{next(ids)}\t{_sentence(rng, y, n_labels)}\t{y}")
            (folder / f"{name}-{split}.csv").write_text("\n".join(rows) + "\n")
        rows = ["0\t\tid\tsentence"] + [f"{i + 1}\t{float(i)}\t{next(ids)}\t{_sentence(rng, rng.randrange(2), 2)}"
                                        for i in range(n_test)]
        (folder / f"{name}-test-student.csv").write_text("\n".join(rows) + "\n")
    for name, col, nl in (("quora", "is_duplicate", "\r\n"), ("sts", "similarity", "\n")):
        for split, n in (("train", n_train), ("dev", n_dev), ("test-student", n_test)):
            head = ["", "id", "sentence1", "sentence2"] + ([col] if split != "test-student" else [])
            rows = ["\t".join(head)]
            for i in range(n):
                y = rng.randrange(2)
                a = _sentence(rng, y, 2).strip()
                b = a if y else _sentence(rng, 1 - y, 2).strip()
                label = (f"{float(y)}" if name == "quora" else f"{rng.uniform(0, 2) + 3 * y:.1f}")
                rows.append("\t".join([str(i), next(ids), a, b] + ([label] if split != "test-student" else [])))
            (folder / f"{name}-{split}.csv").write_text(nl.join(rows) + nl)
    return folder


# The flags naming a run's folder: the scripts refuse two of them, so a builder below adds its own only when
# `extra` names none.
FOLDER_FLAGS = ("--run_name", "--run_dir", "--checkpoint", "--checkpoint_dir")


def overridden(base, extra):
    """`base` flags with `extra` after them, a flag of `extra` replacing the same flag of `base` (with its values:
    the tokens up to the next flag): the scripts refuse a flag given twice, and a test's flags are meant to win."""
    names = {t.partition("=")[0] for t in extra if t.startswith("--")}
    kept, dropping = [], False
    for token in base:
        if token.startswith("--"):
            dropping = token.partition("=")[0] in names
        if not dropping:
            kept.append(token)
    return [*kept, *extra]


def part1_args(tmp_path, data, model, *extra):
    """classifier.py's flags for a tiny run writing under tmp_path (run folder ck/ unless `extra` names one,
    predictions pred/)."""
    folder = [] if set(FOLDER_FLAGS) & set(extra) else ["--run_dir", str(tmp_path / "ck")]
    return overridden(["--pretrained", str(model), "--data_dir", str(data), "--epochs", "2", "--batch_size", "8",
                       *folder, "--predictions_dir", str(tmp_path / "pred")], extra)


def part2_args(tmp_path, data, model, *extra):
    """multitask_classifier.py's flags for a tiny run writing under tmp_path: its run folder ck/ (best
    checkpoint ck/mt.pt) unless `extra` names one, the six published files and the results table in pred/. With
    --eval_only the re-scoring run gets its own folder, eval/ (or eval-2/, ... when one is there)."""
    out = [x for t in ("sst", "para", "sts") for s in ("dev", "test")
           for x in (f"--{t}_{s}_out", str(tmp_path / "pred" / f"{t}-{s}-output.csv"))]
    folder = ["--checkpoint", str(tmp_path / "ck" / "mt.pt")]
    if set(FOLDER_FLAGS) & set(extra):
        folder = []
    elif "--eval_only" in extra:
        n = 1
        while (tmp_path / f"eval{'' if n == 1 else f'-{n}'}").exists():
            n += 1
        folder = ["--run_dir", str(tmp_path / f"eval{'' if n == 1 else f'-{n}'}")]
    return overridden(["--pretrained", str(model), "--data_dir", str(data), "--epochs", "2", "--batch_size", "8",
                       "--fine-tune-mode", "full-model", "--lr", "1e-3", *folder,
                       "--results", str(tmp_path / "pred" / "results.csv"), *out], extra)


def eval_only_args(args, checkpoint, folder):
    """Part 2 flags `args` turned into a --eval_only re-scoring of `checkpoint` in its own run folder `folder`
    (the training run's --checkpoint dropped: that folder keeps the files it wrote)."""
    args = list(args)
    if "--checkpoint" in args:
        i = args.index("--checkpoint")
        del args[i:i + 2]
    return args + ["--run_dir", str(folder), "--eval_only", str(checkpoint)]


def pretrain_texts(tmp_path, n=120):
    """A --texts file of `n` six-word sentences of the tiny vocabulary."""
    words = "the a movie film good bad great awful fun boring love hate is was it this and but not very".split()
    g = torch.Generator().manual_seed(1)
    lines = [" ".join(words[i] for i in torch.randint(len(words), (6,), generator=g).tolist()) for _ in range(n)]
    path = Path(tmp_path) / "texts.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def pretrain_documents(tmp_path, n=30):
    """A --texts file of `n` documents of two to six sentences (pretrain_texts' sentences), a blank line between
    documents."""
    lines = pretrain_texts(tmp_path, 6 * n).read_text().splitlines()
    docs = [lines[6 * d:6 * d + 2 + d % 5] for d in range(n)]
    path = Path(tmp_path) / "documents.txt"
    path.write_text("\n\n".join("\n".join(doc) for doc in docs) + "\n")
    return path


def pretrain_args(tmp_path, model, out, *extra, texts=None):
    """pretrain.py's flags for a tiny run on `texts` (pretrain_texts by default), writing its checkpoint folder to
    `out`."""
    return overridden(["--pretrained", str(model), "--texts", str(texts or pretrain_texts(tmp_path)), "--out",
                       str(out), "--batch_size", "8", "--lr", "3e-3", "--max_length", "16"], extra)


def output_files(folder):
    """{name: text} of the Part 2 leaderboard files in `folder`."""
    return {p.name: p.read_text() for p in sorted(Path(folder).glob("*-output.csv"))}


def snapshot(folder):
    """{relative path: sha256} of every file under `folder`."""
    folder = Path(folder)
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def png_size(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


class FakeData:
    """The few TaskData fields write_dev_scores reads."""

    def __init__(self, ids, texts, labels):
        self.ids = ids
        self.examples = [SimpleNamespace(texts=t) for t in texts]
        self.scored = np.array([l is not None for l in labels])
        self.labels = torch.tensor([0 if l is None else float(l) for l in labels], dtype=torch.float64)

    def __len__(self):
        return len(self.ids)


def make_multitask_run(folder, name="tiny", means=(0.50, 0.62, 0.60), seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    with open(folder / "multitask.jsonl", "w") as fp:
        for e, m in enumerate(means):
            fp.write(json.dumps({"epoch": e, "train_loss": 2.0 - 0.3 * e, "seconds": 60.0, "run": name,
                                 "dev": {"sst": m - 0.1, "quora": m + 0.1, "sts": 2 * m - 1}, "dev_mean": m}) + "\n")
    n = 40
    sst_gold = rng.integers(0, 5, n)
    sst_logits = rng.normal(size=(n, 5)).astype(np.float32)
    sst_logits[np.arange(n), sst_gold] += 1.5 * (rng.random(n) < 0.6)
    write_dev_scores(folder / "sst-dev-scores.npz", "sst",
                     FakeData([f"s{i}" for i in range(n)], [(f"sentence {i}",) for i in range(n)], list(sst_gold)),
                     sst_logits, sst_logits.argmax(-1))
    q_gold = rng.integers(0, 2, n)
    q_logit = (rng.normal(size=n) + 2 * (q_gold - 0.5)).astype(np.float32)
    labels = [int(g) for g in q_gold]
    labels[3] = None  # a broken course row: predicted, not scored
    write_dev_scores(folder / "para-dev-scores.npz", "quora",
                     FakeData([f"q{i}" for i in range(n)], [(f"a {i}", f"b {i}") for i in range(n)], labels),
                     q_logit, (q_logit > 0).astype(int))
    s_gold = rng.uniform(0, 5, n)
    s_pred = np.clip(s_gold + rng.normal(scale=1.0, size=n), 0, 5)
    write_dev_scores(folder / "sts-dev-scores.npz", "sts",
                     FakeData([f"t{i}" for i in range(n)], [(f"x {i}", f"y {i}") for i in range(n)], list(s_gold)),
                     s_pred, s_pred)
    return folder, {"sst": (sst_gold, sst_logits.argmax(-1)), "sts": (s_gold, s_pred)}


def mark_run(folder, pipeline, flags, stem="model"):
    """`folder` marked as a `pipeline` run whose model `stem` is defined by `flags` (runs/identity.py), through
    the lock and note a run writes its mark with (runs/folders.Run.note_flags)."""
    lock = RunLock(folder).acquire("--run_dir", pipeline).claim()
    try:
        lock.note("flags", {stem: flags})
    finally:
        lock.release()


def make_compared_run(folder, outputs, flags=None, pipeline="multitask"):
    """A finished run folder as report.py --compare reads it: per task in `outputs` ({task: (ids, gold,
    predictions)}) its dev-scores file, and with `flags` (run-defining flags, runs/identity.py) its mark
    recording them as a `pipeline` run's."""
    folder = Path(folder)
    folder.mkdir(parents=True)
    prefix = {"sst": "sst", "quora": "para", "sts": "sts"}
    for task, (ids, gold, pred) in outputs.items():
        n = len(ids)
        data = FakeData(list(ids), [(f"sentence {i}",) for i in range(n)], [None if g != g else g for g in gold])
        write_dev_scores(folder / f"{prefix.get(task, 'full-model-' + task)}-dev-scores.npz", task, data,
                         np.asarray(pred, dtype=np.float32), pred)
    if flags is not None:
        mark_run(folder, pipeline, flags)
    return folder


COMPARED_N = 400
COMPARED_IDS = [f"e{k}" for k in range(COMPARED_N)]
COMPARED_GOLD = {"sst": np.arange(COMPARED_N) % 5, "quora": (np.arange(COMPARED_N) // 3) % 2,
                 "sts": (np.arange(COMPARED_N) * 0.37) % 5}


def make_part2_run(folder, skill, seed, flags=None, tasks=("sst", "quora", "sts")):
    """A Part 2 run right on about `skill` of SST and Quora, its STS noise shrinking with skill."""
    rng = np.random.default_rng(seed)
    outputs = {}
    for task in tasks:
        gold = COMPARED_GOLD[task]
        if task == "sts":
            pred = gold + rng.normal(0, 2.5 * (1 - skill), COMPARED_N)
        else:
            pred = np.where(rng.random(COMPARED_N) < skill, gold, (gold + 1) % (5 if task == "sst" else 2))
        outputs[task] = (COMPARED_IDS, gold, pred)
    return make_compared_run(folder, outputs, {"lr": 1e-4, "rdrop_weight": 2.0, "seed": seed, **(flags or {})})


def two_runs_published(root):
    """A project folder: code, the course's layout of tiny data, two finished Part 2 run folders, runs/a (every
    prediction 0) and runs/b (every prediction 1), a's six files published in predictions/ beside a file of the
    user's. Returns the pairs b publishes."""
    write_course_data(root / "data")
    for f in ("bert.py", "classifier.py", "optimizer.py", "utils.py"):
        (root / f).write_text("# code\n")
    for run, label in (("a", 0), ("b", 1)):
        folder = root / "runs" / run
        folder.mkdir(parents=True)
        (folder / RUN_MARK).write_text("{}\n")
        for n in PART2_FILES:
            task, split = split_of(n)
            ids = [e.id for e in read_examples(data_file(root / "data", task, split), task, split)]
            write_predictions(folder / n, task, ids, [label] * len(ids))
    (root / "predictions").mkdir()
    (root / "predictions" / "mynotes.txt").write_text("my notes\n")
    publish([(root / "runs" / "a" / n, root / "predictions" / n) for n in PART2_FILES], "a", root / "runs" / "a",
            log=lambda *_: None)
    return [(root / "runs" / "b" / n, root / "predictions" / n) for n in PART2_FILES]
