"""The three downstream tasks' data (handout 5.2): each split tokenized once (SentenceClassificationDataset,
SentencePairDataset), batched by length, padded to the batch's longest row (or a fixed multiple on a GPU).

What each course CSV holds and reading it with every problem named (TASKS, read_examples), and fetching the
files: minbert/course_data.py. `python datasets.py --fetch [--from DIR]` fills data/ with them and the
handout's two reference files (sanity_check.data, optimizer_test.npy).

Part 1's CSVs as the starter's classifier.py takes them (rows of tuples, a DataLoader's collate_fn):
sentiment_rows and SentimentRows, behind classifier.py's load_data and SentimentDataset.
"""
import os
from pathlib import Path

# first, before torch loads: a Ctrl-C meanwhile is one line (minbert/cli.py)
from minbert.cli import MinbertError, Parser, main_guard

import numpy as np
import torch

from minbert.course_data import MULTITASK, TASKS, Example, read_examples, sentiment_task
from minbert.course_files import check_fetch_flags, fetch_data, fetch_references
from minbert.shapes import choose_widths, padded_width

# ----------------------------------------------------------------------------- tokenized data and batches

class TaskData:
    """One split of one task, tokenized once: batches are slices of lists, padded to their longest row.

    pair_mode 'cross' encodes '[CLS] a [SEP] b [SEP]' as one input; 'siamese' keeps the two sentences
    apart (batches then carry inputs 'a' and 'b').
    """

    def __init__(self, examples, task, tokenizer, max_length=512, pair_mode="cross"):
        self.task = TASKS[task] if isinstance(task, str) else task
        self.examples = examples
        self.ids = [e.id for e in examples]
        self.pad_id = tokenizer.pad_token_id
        self.siamese = self.task.is_pair and pair_mode == "siamese"
        firsts = [e.texts[0] for e in examples]
        if self.task.is_pair and not self.siamese:
            enc = tokenizer(firsts, [e.texts[1] for e in examples], padding=False, max_length=max_length,
                            return_tensors=None)
            self.inputs = {"x": (enc["input_ids"], enc["token_type_ids"])}
        else:
            enc = tokenizer(firsts, padding=False, max_length=max_length, return_tensors=None)
            self.inputs = {"a" if self.siamese else "x": (enc["input_ids"], enc["token_type_ids"])}
            if self.siamese:
                enc = tokenizer([e.texts[1] for e in examples], padding=False, max_length=max_length,
                                return_tensors=None)
                self.inputs["b"] = (enc["input_ids"], enc["token_type_ids"])
        # A broken dev row keeps its id (it gets a prediction) but has no label: `scored` leaves it out.
        self.scored = np.array([e.label is not None for e in examples])
        self.labels = None if not self.scored.any() else torch.tensor(
            [0 if e.label is None else e.label for e in examples],
            dtype=torch.float32 if self.task.kind == "regression" else torch.long)
        self.lengths = np.array([sum(len(v[0][i]) for v in self.inputs.values())
                                 for i in range(len(examples))])
        self.features = None  # cached backbone outputs, when the backbone is frozen
        self.max_length = max_length
        self.pad_multiple = 0  # --pad_multiple (set_pad_multiple): 0 pads a batch to its longest row
        self.widths = ()  # fixed widths a batch is padded to (set_fixed_shapes, for CUDA graphs): () for none
        # rows a batch is padded to, with rows of loss weight 0 (set_fixed_shapes): 0 for as many as it has
        self.rows = 0

    def __len__(self):
        return len(self.examples)

    def batch(self, index):
        """The examples at `index` as padded tensors: {'x' or 'a'/'b': {input_ids, ...}, 'labels', 'index'}.

        With fixed rows (set_fixed_shapes) a short batch is filled up with copies of its first example, and
        'weight' says which rows count (1) and which are filler (0): every loss averages over the rows with
        weight 1 only, so the batch's gradient is the unfilled batch's."""
        real = len(index)
        if self.rows and real < self.rows:
            index = np.concatenate([np.asarray(index), np.repeat(np.asarray(index)[:1], self.rows - real)])
        out = {"index": torch.as_tensor(index)}
        if self.rows:
            out["weight"] = (torch.arange(len(index)) < real).float()
        # With cached backbone features the token inputs are not needed at all.
        for key, (ids, types) in ({} if self.features is not None else self.inputs).items():
            rows = [ids[i] for i in index]
            width = padded_width(max(len(r) for r in rows), self.pad_multiple, self.max_length, self.widths)
            out[key] = pad_rows(rows, [types[i] for i in index], width, self.pad_id)
        if self.labels is not None:
            out["labels"] = self.labels[index]
        if self.features is not None:
            out["features"] = self.features[index]
        return out

    def batches(self, batch_size, shuffle=False, seed=0, bucket=True, rank=0, world_size=1):
        """Yield batches. See `batch_indices` for the order; with world_size > 1 each rank gets its
        slice of every global batch, so N ranks together see exactly what one process would."""
        for idx in batch_indices(self.lengths, batch_size, shuffle, seed, bucket):
            yield self.rank_batch(idx, rank, world_size)

    def rank_batch(self, idx, rank=0, world_size=1):
        """Rank `rank`'s share of the global batch `idx`, as `batch` builds it."""
        part = idx[rank::world_size] if world_size > 1 else idx
        # A rank left without examples still takes the step (DDP needs every rank), with weight 0.
        b = self.batch(part if len(part) else idx[:1])
        b["global_size"], b["ghost"] = len(idx), not len(part)
        return b

    def padding_fraction(self, batch_size, bucket, seed=0):
        """The share of padded positions in one epoch's training batches."""
        batches = batch_indices(self.lengths, batch_size, True, seed, bucket)
        padded = sum(len(i) * self.lengths[i].max() for i in batches)
        return 1.0 - self.lengths.sum() / padded

    def describe_batches(self, batch_size, bucket):
        with_, without = self.padding_fraction(batch_size, True), self.padding_fraction(batch_size, False)
        how = (f"with length bucketing ({without:.0%} without)" if bucket
               else f"(--no_bucket; {with_:.0%} with bucketing)")
        return (f"{self.task.name} train: {len(self)} examples, padding "
                f"{with_ if bucket else without:.0%} of positions {how}")


class SentenceClassificationDataset(TaskData):
    """One split of a single-sentence task (SST, CFIMDB), tokenized once (handout 5.2)."""

    def __init__(self, examples, task, tokenizer, max_length=512):
        super().__init__(examples, task, tokenizer, max_length)
        if self.task.is_pair:
            raise ValueError(f"{self.task.name} is a sentence-pair task: use SentencePairDataset")


class SentencePairDataset(TaskData):
    """One split of a sentence-pair task (Quora, STS), tokenized once (handout 5.2): cross-encoded as
    '[CLS] a [SEP] b [SEP]' (pair_mode 'cross') or the two sentences apart ('siamese')."""

    def __init__(self, examples, task, tokenizer, max_length=512, pair_mode="cross"):
        super().__init__(examples, task, tokenizer, max_length, pair_mode)
        if not self.task.is_pair:
            raise ValueError(f"{self.task.name} is a single-sentence task: use SentenceClassificationDataset")


def pad_rows(rows, types, width, pad_id):
    """Token id lists and their token types as one batch's tensors, padded to `width` with `pad_id`."""
    input_ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    token_types = np.zeros((len(rows), width), dtype=np.int64)
    for j, (row, row_types) in enumerate(zip(rows, types)):
        input_ids[j, :len(row)], token_types[j, :len(row)] = row, row_types
    input_ids = torch.from_numpy(input_ids)
    return {"input_ids": input_ids, "token_type_ids": torch.from_numpy(token_types),
            "attention_mask": (input_ids != pad_id).long()}


def pair_lengths(n1, n2, budget):
    """How many tokens of each sentence a pair keeps when the two may hold `budget` together, cut as the
    tokenizer cuts a pair ('longest_first'): the shorter whole if the longer can give up the rest, else
    half each, the odd token to the longer (to the second when they are equally long)."""
    if n1 + n2 <= budget:
        return n1, n2
    short = min(n1, n2)
    if 2 * short > budget:
        short, long_ = budget // 2, budget - budget // 2
    else:
        long_ = budget - short
    return (short, long_) if n1 <= n2 else (long_, short)


def join_pair(ids1, mask1, ids2, mask2, max_length, pad_id):
    """The cross-encoder's input for two sentences tokenized apart, rows '[CLS] a [SEP]' and '[CLS] b [SEP]'
    among padding: each row's real tokens (by its mask) joined into '[CLS] a [SEP] b [SEP]', token types 0
    then 1, cut to max_length and padded as a cross-encoded TaskData batch is. The handout's
    model_eval_multitask calls predict_paraphrase and predict_similarity with two sentences; a cross-encoder
    trained on pairs must see them so. Exact where each sentence came whole (two cut to the same length no
    longer say which was longer, and so which keeps the odd token)."""
    rows, types = [], []
    for i, (r1, m1, r2, m2) in enumerate(zip(ids1.tolist(), mask1.tolist(), ids2.tolist(), mask2.tolist())):
        a = [t for t, m in zip(r1, m1) if m]
        b = [t for t, m in zip(r2, m2) if m]
        if len(a) < 2 or len(b) < 2 or a[0] != b[0] or a[-1] != b[-1]:
            raise ValueError(f"row {i}: the two sentences of a cross-encoded pair must each be tokenized "
                             f"with its special tokens ('[CLS] ... [SEP]'), as the tokenizer gives them")
        n1, n2 = pair_lengths(len(a) - 2, len(b) - 2, max(max_length - 3, 0))
        rows.append(a[:1 + n1] + a[-1:] + b[1:1 + n2] + b[-1:])
        types.append([0] * (n1 + 2) + [1] * (n2 + 1))
    batch = pad_rows(rows, types, max(len(r) for r in rows), pad_id)
    return {k: v.to(ids1.device) for k, v in batch.items()}


def task_dataset(examples, task, tokenizer, max_length=512, pair_mode="cross"):
    """The handout's dataset class for `task`: SentencePairDataset for pairs, else SentenceClassificationDataset."""
    task = TASKS[task] if isinstance(task, str) else task
    if task.is_pair:
        return SentencePairDataset(examples, task, tokenizer, max_length, pair_mode)
    return SentenceClassificationDataset(examples, task, tokenizer, max_length)


def task_encoding(pair_encoding, task):
    """'cross' or 'siamese' for one pair task. 'mixed' cross-encodes Quora, where reading both questions at
    once wins, and keeps STS siamese, where the cosine of two sentence embeddings wins (RESULTS.md)."""
    if pair_encoding == "mixed":
        return "cross" if task == "quora" else "siamese"
    return pair_encoding


def load_multitask_data(paths, tokenizer, max_length, pair_encoding, splits=("train", "dev", "test"),
                        train_filter=None):
    """{split: {task: dataset}} for SST, Quora and STS; `paths[task][split]` is each CSV.
    `train_filter(example)` says which training examples to keep (--fold; distill.outside_fold)."""
    def examples(task, split):
        rows = read_examples(paths[task][split], task, split)
        return [e for e in rows if train_filter(e)] if split == "train" and train_filter else rows
    return {split: {task: task_dataset(examples(task, split), task, tokenizer, max_length,
                                       task_encoding(pair_encoding, task))
                    for task in MULTITASK}
            for split in splits}


# ----------------------------------------------------------------------------- Part 1's rows, as the starter takes them

def sentiment_rows(path, flag="train"):
    """A Part 1 CSV read by read_examples, as the starter's classifier.py load_data returns it: [(sentence,
    label, id)] (with flag 'train', also its task's number of classes), or [(sentence, id)] with flag 'test'.
    Another flag ('valid', 'dev') reads a labelled dev file."""
    task = sentiment_task(path)
    split = flag if flag in ("train", "test") else "dev"
    examples = read_examples(path, task, split)
    if split == "test":
        return [(e.texts[0], e.id) for e in examples]
    rows = [(e.texts[0], e.label, e.id) for e in examples]
    return (rows, TASKS[task].num_labels) if split == "train" else rows


class SentimentRows(SentenceClassificationDataset):
    """sentiment_rows' rows tokenized once, and a torch Dataset over them: item i is row i, and `collate_fn`
    makes a list of rows the starter's batch ({'token_ids', 'attention_mask', 'labels' when labelled, 'sents',
    'sent_ids'}), padded as `batch` pads, so that a DataLoader loop written for the starter runs on it."""

    def __init__(self, rows, task, tokenizer, max_length=512, labelled=True):
        want = "(sentence, label, id)" if labelled else "(sentence, id)"
        for i, r in enumerate(rows):
            if len(r) != (3 if labelled else 2):
                raise ValueError(f"row {i} has {len(r)} fields: these rows are {want}")
        examples = [Example(r[-1], (r[0],), r[1] if labelled else None, i) for i, r in enumerate(rows)]
        super().__init__(examples, task, tokenizer, max_length)
        self.dataset = list(rows)  # the starter's name; TaskData's `rows` is a fixed batch's
        self.position = {r[-1]: i for i, r in enumerate(rows)}  # ids are unique: read_examples refuses a repeat

    def __getitem__(self, idx):
        return self.dataset[idx]

    def pad_data(self, data):
        """(token_ids, attention_mask, labels, sents, sent_ids) of a list of rows; without labels when unlabelled."""
        b = self.batch([self.position[r[-1]] for r in data])
        labels = (b["labels"],) if "labels" in b else ()
        return (b["x"]["input_ids"], b["x"]["attention_mask"], *labels, [r[0] for r in data], [r[-1] for r in data])

    def collate_fn(self, all_data):
        """The starter's batch of a list of rows (DataLoader's collate_fn)."""
        keys = ["token_ids", "attention_mask"] + (["labels"] if self.labels is not None else []) + ["sents", "sent_ids"]
        return dict(zip(keys, self.pad_data(all_data)))


# ----------------------------------------------------------------------------- fixed shapes (--pad_multiple)

def set_pad_multiple(data, multiple):
    """Give every TaskData in `data` (one, or dicts of them, nested) the padding multiple; returns `data`."""
    if isinstance(data, TaskData):
        data.pad_multiple = multiple
    elif isinstance(data, dict):
        for d in data.values():
            set_pad_multiple(d, multiple)
    return data


def set_fixed_shapes(data, rows):
    """Give every TaskData in `data` (one, or dicts of them, nested) fixed shapes: `rows` rows a batch (a
    short batch filled with rows of weight 0) and widths chosen from its own lengths (choose_widths); returns
    `data`. A CUDA graph replays one shape, so a few fixed shapes mean a few graphs."""
    if isinstance(data, TaskData):
        data.rows = rows
        data.widths = choose_widths([len(r) for ids, _ in data.inputs.values() for r in ids], data.max_length)
    elif isinstance(data, dict):
        for d in data.values():
            set_fixed_shapes(d, rows)
    return data


def batch_indices(lengths, batch_size, shuffle, seed=0, bucket=True, chunk_batches=50):
    """Index lists, one per batch; every example exactly once.

    Bucketing sorts by length inside chunks of `chunk_batches` shuffled batches, so a batch holds
    sentences of similar length (little padding) while the epoch order stays random. Without shuffle
    (evaluation) a bucketed order is sorted by length; callers put predictions back by index.
    """
    n = len(lengths)
    order = np.random.default_rng(seed).permutation(n) if shuffle else np.arange(n)
    if bucket:
        size = chunk_batches * batch_size if shuffle else n
        chunks = [order[i:i + size] for i in range(0, n, size)]
        order = np.concatenate([c[np.argsort(lengths[c], kind="stable")] for c in chunks])
    batches = [order[i:i + batch_size] for i in range(0, n, batch_size)]
    if shuffle and bucket:  # otherwise every chunk would run short-to-long
        batches = [batches[i] for i in np.random.default_rng(seed + 1).permutation(len(batches))]
    return batches


def build_parser():
    ap = Parser(prog="datasets.py", description="Fill data/ with the course CSVs.")
    ap.add_argument("--fetch", action="store_true", help="copy or download the course files into --dest")
    # The environment is read in main(), not here, so that the parser (and docs/flags.md, generated
    # from it) is the same on every machine.
    ap.add_argument("--from", dest="source", default=None,
                    help="a local folder holding the course CSVs (default: $MINBERT_DATA, else download)")
    ap.add_argument("--dest", default=None, help="relative to the project folder (where datasets.py is; "
                                                 "default: data)")
    return ap


def main(argv=None):
    ap = build_parser()
    args = ap.parse_args(argv)
    check_fetch_flags(args.fetch, args.source, args.dest, "datasets.py")
    args.dest = Path(__file__).resolve().parent / (args.dest or "data")
    args.source = args.source or os.environ.get("MINBERT_DATA") or None
    if not args.fetch:
        ap.print_help()
        return
    fetch_data(args.dest, args.source)
    fetch_references(args.dest, args.source)  # sanity_check.py's and optimizer_test.py's, not needed to train


if __name__ == "__main__":
    main_guard(main)
