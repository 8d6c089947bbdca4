"""Part 2: one BERT for sentiment (SST), paraphrase (Quora) and similarity (STS) (handout section 5).

    python multitask_classifier.py --fine-tune-mode full-model --lr 5e-5 --use_gpu
    python multitask_classifier.py --eval_only runs/NAME/multitask.pt      # test_multitask alone

`train_multitask` trains, keeps the best dev mean and writes the six leaderboard files from it;
`test_multitask` rewrites them from a saved checkpoint. Where the pieces are:
  - MultitaskBERT (forward, predict_sentiment, predict_paraphrase, predict_similarity): multitask.py, so
    that ensemble.py and tools/ can rebuild a saved model without importing this script;
  - which task each step trains (--sampler, --sequential) and the task streams: sampling.py;
  - the training loss and its terms (--sts_loss, MNRL, SimCSE, R-Drop, SMART): losses.MultitaskLoss;
  - the epoch protocol (checkpoints, --resume, early stopping, the log): trainer.fit;
  - scoring and the leaderboard files: evaluation.py; the flags: flags.py (multitask_parser).
"""
import sys
import time
from pathlib import Path

from datasets import MULTITASK, TASK_PREFIX, TaskData, load_multitask_data, set_pad_multiple, setup_shapes
from distill import outside_fold, teacher_targets
from extra_tasks import EXTRA_TASKS, parse_extra, read_extra
from evaluation import (format_scores, model_eval_multitask, multitask_mean, multitask_output_files, output_name,
                        write_multitask_outputs)
from flags import (ARCHITECTURE, check_max_length, given_flags, hidden_size, multitask_parser, parse_multitask, resolve_lr,
                   run_defining)
from finetune import merge_for_inference
from losses import MultitaskLoss
from multitask import MultitaskBERT, data_paths, load_multitask, spec_from_args
from precision import setup_precision
from runs import (RunLock, append_row, backup_line, check_outputs, check_table, is_run_folder, open_run, protect,
                  publish, same_file)
from sampling import MultitaskBatches
from tokenizer import BertTokenizer
from trainer import Pipeline, build_trainer, fit
from utils import distributed, get_device, main_guard, main_print, maybe_compile, seed_everything

__all__ = ["MultitaskBERT", "train_multitask", "test_multitask", "get_args", "main"]


def get_args(argv=None):
    return parse_multitask(argv)


def published_paths(args, folder):
    """[(run-folder file, the handout's path it is copied to)] for the six leaderboard files."""
    return [(Path(folder) / output_name(t, s), Path(getattr(args, f"{TASK_PREFIX[t]}_{s}_out")))
            for t in MULTITASK for s in ("dev", "test")]


def data_paths_by_flag(args, splits=("train", "dev", "test")):
    """{'--sst_train': path, ...}: the data files of the run, named by their flags (with --extra_task's files and the
    --distill soft targets when training)."""
    paths = {f"--{TASK_PREFIX[t]}_{s}": getattr(args, f"{TASK_PREFIX[t]}_{s}") for t in MULTITASK for s in splits}
    if "train" in splits:
        paths.update({f"--extra_task {name}": path for name, path in map(parse_extra, args.extra_task)})
        if args.distill:
            paths["--distill"] = args.distill
    return paths


def note_split_overlap(args):
    """A dev or test file that is its task's training file (a copy-paste slip, or an on-purpose check that the
    model can fit its data) is legal but changes what the scores mean: say so in one line."""
    paths = data_paths_by_flag(args)
    for task in MULTITASK:
        train = f"--{TASK_PREFIX[task]}_train"
        for split in ("dev", "test"):
            flag = f"--{TASK_PREFIX[task]}_{split}"
            if same_file(paths[flag], paths[train]):
                main_print(f"note: {flag} {paths[flag]} is the {train} file: its {split} scores measure the training "
                           f"data, not held-out data")


class MultitaskPipeline(Pipeline):
    """Part 2 for trainer.fit: the three tasks' data, the sampler, the loss, the dev mean, the six files."""
    kind, score_name = "multitask", "dev mean"

    def __init__(self, args, device):
        self.args, self.device, self.started = args, device, time.perf_counter()
        self.spec = spec_from_args(args)
        tokenizer = BertTokenizer.from_pretrained(args.pretrained)
        self.data = load_multitask_data(data_paths(args), tokenizer, args.max_length, args.pair_encoding,
                                        train_filter=outside_fold(args.fold))
        if args.fold:
            main_print(f"--fold {args.fold[0]}/{args.fold[1]}: training without fold {args.fold[0]} of "
                       f"{args.fold[1]} of each training set (ensemble.py --soft_targets takes this run's outputs "
                       f"on that fold only)")
        for name, path in map(parse_extra, args.extra_task):  # more training data, each with its own head
            self.data["train"][name] = TaskData(read_extra(name, path), EXTRA_TASKS[name], tokenizer, args.max_length)
        set_pad_multiple(self.data, args.pad_multiple)
        self.model = maybe_compile(MultitaskBERT(self.spec, args.attn).to(device), args.compile)
        self.merge = args.merge
        rank, world = distributed()
        self.mode = "sequential" if args.sequential else args.sampler
        self.stream = MultitaskBatches(self.data["train"], args.batch_size, args.seed, self.mode, args.epochs,
                                       args.steps_per_epoch, args.bucket, rank, world)
        total = args.epochs * -(-self.stream.steps_per_epoch // args.grad_accum)  # optimizer steps of the run
        teacher = teacher_targets(args.distill, self.data["train"], args.distill_temperature) if args.distill else None
        self.loss = MultitaskLoss.from_args(args, self.model, total, teacher)

    def batches(self, epoch):
        batches, steps, counts = self.stream.epoch(epoch)
        return batches, steps, {"batches": counts}

    def evaluate(self):
        scores, _ = model_eval_multitask(self.model, self.data["dev"], 64, self.device, self.args.amp)
        return scores, multitask_mean(scores)

    def describe(self, scores):
        return f"dev {format_scores(scores)}"

    def state_dict(self):
        return self.stream.state_dict()

    def load_state_dict(self, state):
        self.stream.load_state_dict(state)

    def write_outputs(self, files, best):
        a = self.args
        scores, _ = write_multitask_outputs(self.model, self.data["dev"], self.data["test"], files.folder, self.device, a.amp)
        minutes = (time.perf_counter() - self.started) / 60
        append_row(a.results, RESULT_FIELDS, result_row(a, files.folder.name, self.mode, scores, best["epoch"], minutes))
        print(f"best epoch {best['epoch']}: dev {format_scores(scores)}; run folder {files.folder} (checkpoint, "
              f"log {files.log.name}, predictions); results table {a.results}; {minutes:.1f} minutes")
        return scores, published_paths(a, files.folder)


def train_multitask(args, run, device, on_epoch=None, lr_why=""):
    """Train, keep the best dev mean, write the six files. `on_epoch(epoch, dev_mean)` is called after each
    epoch's evaluation (sweep.py's pruner: it may raise to stop the run)."""
    seed_everything(args.seed)
    pipeline = MultitaskPipeline(args, device)
    trainer = build_trainer(pipeline.model, args, device, pipeline.stream.steps_per_epoch, tasks=pipeline.stream.sizes)
    world = distributed()[1]
    main_print(f"multitask: {pipeline.mode} training, {args.pair_encoding} pairs, {args.pooling} pooling, "
               f"{args.fine_tune_mode}{' + PALs' if args.pals else ''}, {lr_why or f'lr {args.lr:g}'}, {args.pretrained} on {device}"
               + (f", {world} processes" if world > 1 else "") + f"; train sizes {pipeline.stream.sizes}")
    for d in pipeline.data["train"].values():
        main_print(d.describe_batches(args.batch_size, args.bucket))
    return fit(pipeline, trainer, run.files(args.checkpoint_name or "multitask"), run.name, args.epochs,
               args.patience, args.resume, run_defining(args, data_paths_by_flag(args)), on_epoch, f"the same command plus --resume {run.how}",
               args.tensorboard)


def test_multitask(args, device, argv=None):
    """Rewrite the six leaderboard files (and the raw dev outputs) from the model saved in --eval_only,
    rebuilt from its own spec; architecture flags typed on the command line must agree with it."""
    typed = given_flags(multitask_parser(), sys.argv[1:] if argv is None else argv)
    given = {k: getattr(args, k) for k in ARCHITECTURE if k in typed}
    model, state, spec = load_multitask(args.eval_only, device, args.attn, given)
    merge_for_inference(model.bert, args.merge, spec.fine_tune_mode, main_print)
    max_length = spec.max_length
    if "max_length" in typed and args.max_length != spec.max_length:
        check_max_length(args.max_length, spec.pretrained)
        max_length = args.max_length
        main_print(f"tokenizing at --max_length {max_length} (the model was trained at {spec.max_length})")
    data = load_multitask_data(data_paths(args), BertTokenizer.from_pretrained(spec.pretrained), max_length,
                               spec.pair_encoding, ("dev", "test"))
    set_pad_multiple(data, args.pad_multiple)
    folder = Path(args.eval_only).parent
    # The files go beside the checkpoint: in its run folder (locked, so that no run is writing there), or in a
    # folder of the user's, where a file of the same name that no run wrote is kept as a backup first.
    lock = RunLock(folder).acquire("--eval_only", "multitask").claim() if is_run_folder(folder) else None
    try:
        kept = [] if lock else protect(multitask_output_files(folder))
        if kept:
            print(backup_line(kept))
        scores, _ = write_multitask_outputs(model, data["dev"], data["test"], folder, device, args.amp)
        publish(published_paths(args, folder), state.get("run") or folder.name, folder)
    finally:
        if lock:
            lock.release()
    print(f"{args.eval_only} (epoch {state['epoch']}): dev {format_scores(scores)}")
    return scores


RESULT_FIELDS = ["run", "training", "pair_encoding", "pooling", "fine_tune_mode", "pretrained", "lr", "batch_size",
                 "epochs", "steps_per_epoch", "seed", "loss_weights", "sst_acc", "quora_acc", "sts_r", "mean",
                 "best_epoch", "minutes"]


def result_row(args, run_name, mode, s, best_epoch, minutes):
    """The results table's row of one finished run (--results)."""
    return {"run": run_name, "training": mode, "pair_encoding": args.pair_encoding, "pooling": args.pooling,
            "fine_tune_mode": args.fine_tune_mode, "pretrained": args.pretrained, "lr": args.lr,
            "batch_size": args.batch_size, "epochs": args.epochs, "steps_per_epoch": args.steps_per_epoch or "",
            "seed": args.seed, "loss_weights": " ".join(f"{w:g}" for w in args.loss_weights),
            "sst_acc": f"{s['sst']:.4f}", "quora_acc": f"{s['quora']:.4f}", "sts_r": f"{s['sts']:.4f}",
            "mean": f"{multitask_mean(s):.4f}", "best_epoch": best_epoch, "minutes": f"{minutes:.1f}"}


def main(argv=None, on_epoch=None):
    args = get_args(argv)
    device = get_device(args.use_gpu)
    setup_precision(args, device, log=main_print)
    setup_shapes(args, device, log=main_print)
    outputs = [(f"--{TASK_PREFIX[t]}_{s}_out", getattr(args, f"{TASK_PREFIX[t]}_{s}_out")) for t in MULTITASK
               for s in ("dev", "test")]
    splits = ("dev", "test") if args.eval_only else ("train", "dev", "test")
    inputs = [(f"the {flag} data file", path) for flag, path in data_paths_by_flag(args, splits).items()]
    if args.eval_only:
        folder = Path(args.eval_only).parent
        check_outputs(files=outputs, inputs=inputs + [("the --eval_only checkpoint", args.eval_only)], own=folder)
        return test_multitask(args, device, argv)
    check_max_length(args.max_length, args.pretrained)
    note_split_overlap(args)
    lr_why = resolve_lr(args, hidden_size(args.pretrained))
    stem = args.checkpoint_name or "multitask"
    with open_run("multitask", [stem], args.run_name, args.run_dir, args.resume) as run:
        files = run.files(stem)
        check_table(args.results, RESULT_FIELDS, "--results")
        check_outputs(files=outputs + [("--results", args.results)], own=run.folder,
                      inputs=inputs + [("this run's checkpoint", files.best), ("this run's checkpoint", files.last),
                                       ("this run's log", files.log)])
        return train_multitask(args, run, device, on_epoch, lr_why)


if __name__ == "__main__":
    main_guard(main)
