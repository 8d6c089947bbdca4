"""What ensemble.py runs (its docstring is the user's guide): every member checked before any of them
runs, then each checkpoint rebuilt from its own spec and run on dev and test (and with --soft_targets
on the training sets), each folder's six prediction files read, and the members averaged on their
outputs: SST's five class probabilities, Quora's P(paraphrase), STS's 0-5 score. A folder contributes
its labels as one-hot probabilities (a tie goes to the lower SST class and to "not a paraphrase"). The
ensemble is a run like any other: its files go into its own run folder, with members.txt naming its
members, and are then published to --out."""
import dataclasses
from pathlib import Path

import numpy as np
import torch

from datasets import load_multitask_data, set_pad_multiple
from evaluation import model_eval_multitask
from minbert.cli import MinbertError, set_interrupt_hint
from minbert.course_data import MULTITASK, data_file, read_examples
from minbert.files import special_file
from minbert.objectives.distill import SOFT_TARGETS, held_out_weights, save_soft_targets
from minbert.runs.checkpoint import load_checkpoint, read_spec
from minbert.project_paths import run_folder_of
from minbert.runs.folders import best_checkpoint, is_run_folder, open_run, pipeline_of
from minbert.runs.lock import still_running
from minbert.runs.outputs import check_outputs
from minbert.runs.publishing import publish
from minbert.scoring import format_scores, output_name, read_predictions, score, write_predictions
from minbert.tasks.multitask import load_multitask
from tokenizer import BertTokenizer

N_SST = 5
SPLITS = ("dev", "test")


def reference(data_dir):
    """{(task, split): (ids, gold)}: the ids every member must predict, in file order, and the gold labels
    (None where a row has none, and on test)."""
    def rows(task, split):
        return read_examples(data_file(data_dir, task, split), task, split, log=lambda *_: None)
    return {(task, split): tuple(zip(*[(e.id, e.label) for e in rows(task, split)]))
            for task in MULTITASK for split in SPLITS}


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


def resolve_member(member):
    """A member as given, except a multitask run's folder, which stands for its best checkpoint: its model's
    outputs average into the ensemble, where its six prediction files would only vote with their labels."""
    p = Path(member)
    if not (p.is_dir() and is_run_folder(p)):
        return member
    checkpoints = [f for f in p.glob("*.pt") if not f.name.endswith("-last.pt")]
    if pipeline_of(p) in (None, "multitask", "ensemble") and not checkpoints:
        return member  # a folder of prediction files (an ensemble's own, say)
    best = best_checkpoint(p, "multitask", "ensemble.py")
    print(f"member {member}: a run folder; its checkpoint {best} is used")
    return str(best)


def vote_ties(mean, n_members):
    """Rows where prediction-folder members' votes tie (SST: two classes share the top mean; Quora: the mean
    is exactly 1/2), with how decide() breaks them; None when nothing ties."""
    sst = mean["sst", "test"]
    top = sst.max(-1, keepdims=True)
    tied = int(((sst == top).sum(-1) > 1).sum()) + int((mean["quora", "test"] == 0.5).sum())
    if not tied:
        return None
    return (f"{tied} test rows tie between the {n_members} members' votes; a tie goes to the lower SST class "
            "and to 'not a paraphrase' (give checkpoints, whose probabilities rarely tie, to avoid this)")


def check_members(members):
    """Each member once, each one a multitask checkpoint or a prediction folder: all checked before any runs.
    Returns each checkpoint member's --fold (I, K), or None."""
    seen, epochs, folds = {}, {}, []
    for m in members:
        p = Path(m)
        if not p.exists():
            raise MinbertError(f"{m}: no such checkpoint or prediction folder")
        if not p.is_file() and not p.is_dir():  # a pipe, a device: checked with the rest, before any member runs
            raise MinbertError(f"{m}: is {special_file(p)}, not a checkpoint or prediction folder")
        key = p.resolve()
        if key in seen:
            raise MinbertError(f"{m}: the same member as {seen[key]}; an "
                               "ensemble of one model twice is that model")
        seen[key] = m
        if p.is_file():
            running = still_running(run_folder_of(p) or p.parent)  # (no mark there: "")
            if running:  # legal (its best so far is a model), but the file may be replaced by a better one
                print(f"note: member {m}: its run is still training ({running}); its best checkpoint so far is "
                      "used, which the run may replace")
            state = load_checkpoint(p)
            read_spec(state, p, "multitask")
            fold = (state.get("flags") or {}).get("fold")
            folds.append(tuple(fold) if fold else None)
            # a run's best and last checkpoints hold the same weights when its last epoch scored best
            saved = (p.resolve().parent, state.get("model_name"), state.get("epoch"))
            if saved[2] is not None and saved in epochs:
                raise MinbertError(f"{m}: the same weights as {epochs[saved]} (run {saved[0]}, epoch {saved[2]}: "
                                   "its best epoch was its last); an ensemble of one model twice is that model")
            epochs[saved] = m
    return folds


def checkpoint_member(path, settings, ref, cache):
    """The outputs of one multitask checkpoint: ({(task, split): outputs to average}, and with --soft_targets
    {task: (training ids, raw outputs), "fold": its --fold or None}, else None). `cache` keeps the tokenised
    data between members that share a tokenizer, length and pair encoding (the usual case)."""
    runtime = settings.runtime
    model, state, spec = load_multitask(path, runtime.device, runtime.attn)
    classes = model.sst_head[-1].out_features
    if classes != N_SST:
        raise MinbertError(f"{path}: its SST head has {classes} classes, the ensemble's task has {N_SST}")
    splits = SPLITS + (("train",) if settings.soft_targets else ())
    key = (spec.pretrained, spec.max_length, spec.pair_encoding)
    if key not in cache:
        paths = {t: {split: data_file(settings.data_dir, t, split) for split in splits} for t in MULTITASK}
        cache[key] = load_multitask_data(paths, BertTokenizer.from_pretrained(spec.pretrained),
                                         spec.max_length, spec.pair_encoding, splits)
        set_pad_multiple(cache[key], runtime.pad_multiple)
    data = cache[key]
    outputs = {}
    for split in SPLITS:
        raw = {}
        model_eval_multitask(model, data[split], settings.batch_size, runtime.device, runtime.amp, raw=raw)
        for task in MULTITASK:
            if data[split][task].ids != list(ref[task, split][0]):
                raise MinbertError(f"{path}: its {task} {split} ids differ from {settings.data_dir}'s")
            outputs[task, split] = as_probabilities(task, raw[task])
    if not settings.soft_targets:
        return outputs, None
    raw = {}
    model_eval_multitask(model, data["train"], settings.batch_size, runtime.device, runtime.amp, raw=raw)
    fold = (state.get("flags") or {}).get("fold")  # --fold I/K: the member did not see fold I
    return outputs, {"fold": tuple(fold) if fold else None,
                     **{task: (data["train"][task].ids, raw[task]) for task in MULTITASK}}


def folder_member(folder, ref):
    """The six prediction files of `folder` as one-hot probabilities (SST, Quora) and scores (STS)."""
    outputs = {}
    for (task, split), (ids, _) in ref.items():
        path = Path(folder) / output_name(task, split)
        preds, duplicated = read_predictions(path, task)
        if duplicated:
            raise MinbertError(f"{path}: id {duplicated[0]} appears more than once")
        if list(preds) != list(ids):
            stray = [i for i in preds if i not in set(ids)] + [i for i in ids if i not in preds]
            raise MinbertError(f"{path}: its ids are not those of {task} {split}: "
                               + (f"id {stray[0]} is in one and not the other" if stray
                                  else "they come in another order"))
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


def same_predictions(names, members):
    """The first two members whose decisions (decide) agree on every example of every file, or None (STS's
    similarities to the 3 decimals a prediction file keeps them to, so that a folder and a checkpoint compare)."""
    def same(key, a, b):
        a, b = decide(key[0], a), decide(key[0], b)
        return np.allclose(a, b, rtol=0, atol=1e-3) if key[0] == "sts" else np.array_equal(a, b)
    for i in range(len(members)):
        for j in range(i):
            if all(same(k, members[i][k], members[j][k]) for k in members[i]):
                return names[j], names[i]
    return None


def dev_scores(outputs, ref):
    scores = {}
    for task in MULTITASK:
        _, gold = ref[task, "dev"]
        keep = [i for i, g in enumerate(gold) if g is not None]
        scores[task] = score(task, decide(task, outputs[task, "dev"])[keep],
                             np.array([gold[i] for i in keep]))
    return scores


def run_ensemble(settings):
    """ensemble.py: every member checked, then run (or read), averaged and published; returns the dev scores."""
    if len(settings.members) < 2 and not settings.soft_targets:  # one teacher's soft targets are a use of one
        raise MinbertError(f"{settings.members[0]}: one member; an ensemble averages at least two models (one "
                           "alone is that model: its own files are in its run folder)")
    out = Path(settings.out)
    settings = dataclasses.replace(settings, members=tuple(resolve_member(m) for m in settings.members))
    folds = check_members(settings.members)
    if settings.in_sample and not (settings.soft_targets and any(folds)):
        raise MinbertError("--in_sample changes cross-fitted soft targets: it "
                           "needs --soft_targets and members trained with --fold")
    if settings.in_sample:
        folds = [None] * len(folds)
    if settings.soft_targets:
        held_out_weights(folds, [])  # members of cross-fitted targets: one per fold, checked before any runs
    ref = reference(settings.data_dir)
    # cheap: checked up front too
    folders = {m: folder_member(m, ref) for m in settings.members if Path(m).is_dir()}
    if settings.soft_targets and folders:
        raise MinbertError(f"--soft_targets: member {next(iter(folders))} is a folder of predictions, which "
                           "hold no outputs on the training sets; give checkpoints")
    inputs = [(f"the {t} {s} data file", data_file(settings.data_dir, t, s)) for t in MULTITASK for s in SPLITS] + [
        (f"member {m}", m) for m in settings.members if not Path(m).is_dir()] + [
        ("a file of "
         f"member {m}", Path(m) / output_name(t, s)) for m in folders for t in MULTITASK for s in SPLITS]
    with open_run("ensemble", None, settings.run.name, settings.run.dir) as run:
        check_outputs(dirs=[("--out", out)],
                      files=[("--out", out / output_name(t, s)) for t in MULTITASK for s in SPLITS],
                      inputs=inputs, own=run.folder, backup=settings.run.backup, typed=settings.run.typed)
        members, cache, soft = [], {}, []
        for m in settings.members:
            outputs, train = ((folders[m], None) if m in folders
                              else checkpoint_member(m, settings, ref, cache))
            members.append(outputs)
            soft.append(train)
            print(f"member {m}: dev {format_scores(dev_scores(members[-1], ref))}")
        twin = same_predictions(settings.members, members)
        if twin:
            print(f"note: members {twin[0]} and {twin[1]} predict the same on every example of the six files (one "
                  "model given twice: a copy, or its prediction folder and its checkpoint?): together they weigh as one "
                  "model counted twice")
        mean = {k: np.mean([o[k] for o in members], axis=0) for k in ref}
        ties = vote_ties(mean, len(members)) if folders else None
        if ties:
            print(ties)
        # From here the run folder holds the ensemble's files, and a Ctrl-C leaves it partial; a typed run name
        # then names a folder that already holds a run, so the same command would be refused.
        flag = "--run_dir" if settings.run.dir else "--run_name" if settings.run.name else None
        again = (f"run the command again with another {flag}, or after deleting {run.folder}" if flag
                 else "run the same command again (it makes a new run folder)")
        files = []
        for (task, split), (ids, _) in ref.items():
            files.append(write_predictions(run.folder / output_name(task, split), task, ids,
                                           decide(task, mean[task, split])))
            set_interrupt_hint(f"the ensemble's files written so far are in {run.folder}/ and nothing was "
                               f"copied to {out}/: {again}")
        (run.folder / "members.txt").write_text("".join(f"{Path(m).resolve()}\n" for m in settings.members))
        scores = dev_scores(mean, ref)
        print(f"ensemble of {len(members)}: dev {format_scores(scores)}; six files in {run.folder}/")
        if settings.soft_targets:
            folds = [None if settings.in_sample else s["fold"] for s in soft]
            path = save_soft_targets(run.folder / SOFT_TARGETS, settings.members,
                                     {t: (soft[0][t][0], [s[t][1] for s in soft]) for t in MULTITASK}, folds)
            how = ", each example's from the members that did not train on it (--fold)" if any(folds) else ""
            print(f"soft targets of {len(soft)} members on the training sets{how}: {path}; train a student "
                  f"on them with multitask_classifier.py --distill {path}")
        publish([(f, out / f.name) for f in files], run.name, run.folder)
        set_interrupt_hint(f"the ensemble is complete: its files are in {run.folder}/ and were copied to {out}/")
        return scores
