"""Combine K multitask models into one set of leaderboard files (handout 5.3: ensembling "almost always
boosts performance").

    python ensemble.py runs/a/multitask.pt runs/b/multitask.pt runs/c/multitask.pt [--out predictions]

A member is a multitask_classifier.py checkpoint (rebuilt with its own architecture flags and run on dev
and test), or a folder holding the six prediction files of a run when only predictions are left.
Checkpoints are combined on their outputs: SST by averaging the five class probabilities, Quora by
averaging P(paraphrase), STS by averaging the 0-5 score. A folder contributes its labels as one-hot
probabilities, so folders alone make a majority vote (a tie goes to the lower SST class and to "not a
paraphrase") and the average of the STS scores.
"""
from pathlib import Path

import numpy as np
import torch

from datasets import read_examples
from evaluation import MULTITASK, model_eval_multitask, read_predictions, score, write_predictions
from flags import Parser, add_speed_flags, positive_int
from precision import setup_precision
from runs import check_outputs
from multitask_classifier import (FLAG_PREFIX, format_scores, get_args as multitask_args, load_data, load_multitask,
                                  output_name)
from utils import MinbertError, get_device, main_guard

N_SST = 5
SPLITS = ("dev", "test")


def get_args(argv=None):
    ap = Parser(description=__doc__)
    ap.add_argument("members", nargs="+", metavar="CKPT", help="multitask checkpoints, or folders of prediction files")
    ap.add_argument("--data_dir", default="data")
    ap.add_argument("--out", default="predictions", help="where the six ensembled leaderboard files go")
    ap.add_argument("--use_gpu", action="store_true")
    ap.add_argument("--batch_size", type=positive_int, default=64)
    add_speed_flags(ap)
    return ap.parse_args(argv)


def reference(data_dir):
    """{(task, split): (ids, gold)}: the ids every member must predict, in file order, and the gold labels
    (None where a row has none, and on test)."""
    paths = multitask_args(["--data_dir", data_dir])
    ref = {}
    for task in MULTITASK:
        for split in SPLITS:
            examples = read_examples(getattr(paths, f"{FLAG_PREFIX[task]}_{split}"), task, split, log=lambda *_: None)
            ref[task, split] = ([e.id for e in examples], [e.label for e in examples])
    return ref


def as_probabilities(task, outputs):
    """Raw outputs in the form that is averaged: SST class probabilities, Quora P(paraphrase), STS scores.
    float64, so averaging copies of one model gives back its own decisions."""
    x = torch.as_tensor(np.asarray(outputs, dtype=np.float64))
    if task == "sst":
        return torch.softmax(x, -1).numpy()
    return torch.sigmoid(x).numpy() if task == "quora" else x.numpy()


def decide(task, mean):
    if task == "sst":
        return mean.argmax(-1)
    return (mean > 0.5).astype(np.int64) if task == "quora" else mean


def checkpoint_member(path, args, device, ref, cache):
    """{(task, split): outputs to average} of one multitask checkpoint. `cache` keeps the tokenised data
    between members that share a tokenizer, length and pair encoding (the usual case)."""
    margs = multitask_args(["--data_dir", args.data_dir])
    margs.amp = args.amp
    model, _ = load_multitask(path, margs, device)
    classes = model.sst_head[-1].out_features
    if classes != N_SST:
        raise MinbertError(f"{path}: its SST head has {classes} classes, the ensemble's task has {N_SST}")
    key = (margs.pretrained, margs.max_length, margs.pair_encoding)
    if key not in cache:
        cache[key] = load_data(margs, SPLITS)
    data = cache[key]
    outputs = {}
    for split in SPLITS:
        raw = {}
        model_eval_multitask(model, data[split], args.batch_size, device, args.amp, raw=raw)
        for task in MULTITASK:
            if data[split][task].ids != ref[task, split][0]:
                raise MinbertError(f"{path}: its {task} {split} ids differ from {args.data_dir}'s")
            outputs[task, split] = as_probabilities(task, raw[task])
    return outputs


def folder_member(folder, ref):
    """The six prediction files of `folder` as one-hot probabilities (SST, Quora) and scores (STS)."""
    outputs = {}
    for (task, split), (ids, _) in ref.items():
        path = Path(folder) / output_name(task, split)
        preds, duplicated = read_predictions(path)
        if duplicated:
            raise MinbertError(f"{path}: id {duplicated[0]} appears more than once")
        if list(preds) != ids:
            stray = [i for i in preds if i not in set(ids)] + [i for i in ids if i not in preds]
            raise MinbertError(f"{path}: its ids are not those of {task} {split}: "
                               + (f"id {stray[0]} is in one and not the other" if stray else "they come in another order"))
        values = np.array(list(preds.values()))
        labels = {"sst": np.arange(N_SST), "quora": np.arange(2)}.get(task)
        if labels is not None:
            bad = np.flatnonzero(~np.isin(values, labels))
            if len(bad):
                raise MinbertError(f"{path}: id {ids[bad[0]]}: {values[bad[0]]:g} is not a {task} label "
                                   f"(0-{len(labels) - 1})")
            values = np.eye(N_SST)[values.astype(int)] if task == "sst" else values
        outputs[task, split] = values
    return outputs


def dev_scores(outputs, ref):
    scores = {}
    for task in MULTITASK:
        _, gold = ref[task, "dev"]
        keep = [i for i, g in enumerate(gold) if g is not None]
        scores[task] = score(task, decide(task, outputs[task, "dev"])[keep], np.array([gold[i] for i in keep]))
    return scores


def main(argv=None):
    args = get_args(argv)
    device = get_device(args.use_gpu)
    setup_precision(args, device)
    out = Path(args.out)
    check_outputs(dirs=[out], files=[out / output_name(t, s) for t in MULTITASK for s in SPLITS])
    ref = reference(args.data_dir)
    members, cache = [], {}
    for m in args.members:
        if Path(m).is_dir():
            members.append(folder_member(m, ref))
        elif Path(m).is_file():
            members.append(checkpoint_member(m, args, device, ref, cache))
        else:
            raise MinbertError(f"{m}: no such checkpoint or prediction folder")
        print(f"member {m}: dev {format_scores(dev_scores(members[-1], ref))}")
    mean = {k: np.mean([o[k] for o in members], axis=0) for k in ref}
    for (task, split), (ids, _) in ref.items():
        write_predictions(out / output_name(task, split), task, ids, decide(task, mean[task, split]))
    scores = dev_scores(mean, ref)
    print(f"ensemble of {len(members)}: dev {format_scores(scores)}; six files in {out}/")
    return scores


if __name__ == "__main__":
    main_guard(main)
