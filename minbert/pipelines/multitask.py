"""Part 2 (handout section 5): one BERT for sentiment (SST), paraphrase (Quora) and similarity (STS).

`train_part2` trains, keeps the best dev mean and writes the six leaderboard files from it; `rescore_part2`
rewrites them from a saved checkpoint (--eval_only). Where the pieces are:
  - MultitaskBERT (forward, predict_sentiment, predict_paraphrase, predict_similarity): tasks/multitask.py;
  - which task each step trains (--sampler, --sequential) and the task streams: tasks/sampling.py;
  - the training loss and its terms (--sts_loss, MNRL, SimCSE, R-Drop, SMART, --distill):
    objectives/losses.py;
  - the epoch protocol (checkpoints, --resume, early stopping, the log): training/fit.py;
  - scoring and the leaderboard files: evaluation.py; the flags: flags/table.py, parsed and turned into
    a specs.MultitaskSettings by flags/settings.py.
"""
import time
from pathlib import Path

from datasets import TaskData, load_multitask_data, set_pad_multiple
from evaluation import model_eval_multitask, write_multitask_outputs
from minbert.cli import main_print
from minbert.course_data import MULTITASK, TASK_PREFIX, require_data_file
from minbert.finetuning.modes import merge_for_inference
from minbert.hub import check_max_length
from minbert.objectives.distill import outside_fold, teacher_targets
from minbert.objectives.losses import MultitaskLoss
from minbert.runs.folders import open_run
from minbert.runs.outputs import RESULTS_TABLE, append_once, check_outputs, check_table
from minbert.runs.publishing import publish, same_file
from minbert.scoring import format_scores, multitask_mean, output_name
from minbert.tasks.extra import EXTRA_TASKS, read_extra
from minbert.tasks.multitask import MultitaskBERT, load_multitask
from minbert.tasks.sampling import MultitaskBatches
from minbert.training.fit import Pipeline, fit
from minbert.training.trainer import build_trainer
from tokenizer import BertTokenizer
from utils import distributed, maybe_compile, seed_everything

SPLITS = ("train", "dev", "test")


def published_paths(settings, folder):
    """[(run-folder file, the handout's path it is copied to)] for the six leaderboard files."""
    return [(Path(folder) / output_name(t, s), Path(settings.published[t, s]))
            for t in MULTITASK for s in ("dev", "test")]


def data_paths_by_flag(settings, splits=SPLITS):
    """{'--sst_train': path, ...}: the data files of the run, named by their flags (with --extra_task's files
    and the --distill soft targets when training)."""
    d = settings.data
    paths = {f"--{TASK_PREFIX[t]}_{s}": d.paths[t][s] for t in MULTITASK for s in splits}
    if "train" in splits:
        paths.update({f"--extra_task {name}": path for name, path in d.extra})
        if d.distill:
            paths["--distill"] = d.distill
    return paths


def note_split_overlap(settings):
    """A dev or test file that is its task's training file (a copy-paste slip, or an on-purpose check that the
    model can fit its data) is legal but changes what the scores mean: say so in one line."""
    paths = data_paths_by_flag(settings)
    for task in MULTITASK:
        train = f"--{TASK_PREFIX[task]}_train"
        for split in ("dev", "test"):
            flag = f"--{TASK_PREFIX[task]}_{split}"
            if same_file(paths[flag], paths[train]):
                main_print(f"note: {flag} {paths[flag]} is the {train} file: its {split} scores measure the "
                           "training data, not held-out data")


class MultitaskPipeline(Pipeline):
    """Part 2 for training/fit.py: the three tasks' data, the sampler, the loss, the dev mean, the six files."""
    kind, score_name = "multitask", "dev mean"
    loss_scales = " (or a weight that scales the loss: --loss_weights, a regulariser's)"

    def __init__(self, settings):
        runtime = settings.runtime
        self.settings, self.device, self.amp, self.started = settings, runtime.device, runtime.amp, time.perf_counter()
        self.file_stem, self.inputs = settings.run.stem or "multitask", data_paths_by_flag(settings)
        self.spec, d = settings.model, settings.data
        tokenizer = BertTokenizer.from_pretrained(self.spec.pretrained)
        self.data = load_multitask_data(d.paths, tokenizer, self.spec.max_length, self.spec.pair_encoding,
                                        train_filter=outside_fold(d.fold))
        if d.fold:
            main_print(f"--fold {d.fold[0]}/{d.fold[1]}: training without fold {d.fold[0]} of {d.fold[1]} of "
                       "each training set (ensemble.py --soft_targets "
                       "takes this run's outputs on that fold only)")
        for name, path in d.extra:  # more training data, each with its own head
            self.data["train"][name] = TaskData(read_extra(name, path), EXTRA_TASKS[name], tokenizer,
                                                self.spec.max_length)
        set_pad_multiple(self.data, runtime.pad_multiple)
        self.model = maybe_compile(MultitaskBERT(self.spec, runtime.attn, runtime.fast_dropout).to(self.device),
                                   runtime.compile)
        self.merge = settings.merge
        rank, world = distributed()
        self.mode = d.sampler
        self.stream = MultitaskBatches(self.data["train"], d.batch_size, settings.recipe.seed, self.mode,
                                       settings.recipe.epochs, d.steps_per_epoch, d.bucket, rank, world)
        # optimizer steps of the run
        total = settings.recipe.epochs * -(-self.stream.steps_per_epoch // settings.recipe.grad_accum)
        teacher = (teacher_targets(d.distill, self.data["train"],
                                   settings.losses.distill_temperature) if d.distill else None)
        self.loss = MultitaskLoss.from_spec(settings.losses, settings.regularizers, self.model, total, teacher,
                                            settings.recipe.label_smoothing)

    def batches(self, epoch):
        batches, steps, counts = self.stream.epoch(epoch)
        return batches, steps, {"batches": counts}

    def evaluate(self):
        scores, _ = model_eval_multitask(self.model, self.data["dev"], 64, self.device, self.amp)
        return scores, multitask_mean(scores)

    def describe(self, scores):
        return f"dev {format_scores(scores)}"

    def state_dict(self):
        return self.stream.state_dict()

    def load_state_dict(self, state):
        self.stream.load_state_dict(state)

    def write_outputs(self, files, best):
        settings = self.settings
        scores, _ = write_multitask_outputs(self.model, self.data["dev"], self.data["test"], files.folder,
                                            self.device, self.amp)
        minutes = (time.perf_counter() - self.started) / 60
        append_once(settings.results, RESULTS_TABLE, result_row(settings, files.folder.name, self.mode, scores,
                                                         best["epoch"], minutes))
        print(f"best epoch {best['epoch']}: dev {format_scores(scores)}; run folder {files.folder} "
              f"(checkpoint, log {files.log.name}, predictions); "
              f"results table {settings.results}; {minutes:.1f} minutes")
        return scores, published_paths(settings, files.folder)


def train_part2(settings, run, on_epoch=None):
    """Train, keep the best dev mean, write the six files. `on_epoch(epoch, dev_mean)` is called after each
    epoch's evaluation (sweep.py's pruner: it may raise to stop the run)."""
    seed_everything(settings.recipe.seed)
    pipeline = MultitaskPipeline(settings)
    trainer = build_trainer(pipeline.model, pipeline.loss, settings.recipe, settings.runtime,
                            pipeline.stream.steps_per_epoch, tasks=pipeline.stream.sizes,
                            train_data=pipeline.data["train"], rows=settings.data.batch_size)
    world, m = distributed()[1], settings.model
    main_print(f"multitask: {pipeline.mode} training, {m.pair_encoding} pairs, {m.pooling} pooling, "
               f"{m.fine_tune_mode}{' + PALs' if m.pals else ''}, {settings.recipe.lr_why}, {m.pretrained} on "
               f"{settings.runtime.device}" + (f", {world} processes" if world > 1 else "")
               + f"; train sizes {pipeline.stream.sizes}")
    for d in pipeline.data["train"].values():
        main_print(d.describe_batches(settings.data.batch_size, settings.data.bucket))
    return fit(pipeline, trainer, run, settings, on_epoch)


def rescore_part2(settings, run):
    """Write the six leaderboard files (and the raw dev outputs) of the model saved in
    settings.eval_only into the run folder `run` (an eval run's own, never the checkpoint's), and
    publish them; the model is rebuilt from its own spec, and architecture flags typed on the command
    line (settings.given) must agree with it."""
    runtime = settings.runtime
    model, state, spec = load_multitask(settings.eval_only, runtime.device, runtime.attn, settings.given)
    merge_for_inference(model.backbone, settings.merge, spec.fine_tune_mode, main_print)
    max_length = spec.max_length
    if settings.max_length_given and settings.model.max_length != spec.max_length:
        check_max_length(settings.model.max_length, spec.pretrained)
        max_length = settings.model.max_length
        main_print(f"tokenizing at --max_length {max_length} (the model was trained at {spec.max_length})")
    data = load_multitask_data(settings.data.paths, BertTokenizer.from_pretrained(spec.pretrained), max_length,
                               spec.pair_encoding, ("dev", "test"))
    set_pad_multiple(data, runtime.pad_multiple)
    (run.folder / "evaluated.txt").write_text(f"{Path(settings.eval_only).resolve()}\n")
    scores, _ = write_multitask_outputs(model, data["dev"], data["test"], run.folder, runtime.device, runtime.amp)
    publish(published_paths(settings, run.folder), run.name, run.folder)
    print(f"{settings.eval_only} (epoch {state['epoch']}): dev {format_scores(scores)}; files in {run.folder}")
    return scores


def result_row(settings, run_name, mode, s, best_epoch, minutes):
    """The results table's row of one finished run (--results)."""
    m, r, d = settings.model, settings.recipe, settings.data
    return {"run": run_name, "training": mode, "pair_encoding": m.pair_encoding, "pooling": m.pooling,
            "fine_tune_mode": m.fine_tune_mode, "pretrained": m.pretrained, "lr": r.lr,
            "batch_size": d.batch_size, "epochs": r.epochs, "steps_per_epoch": d.steps_per_epoch or "",
            "seed": r.seed, "loss_weights": " ".join(f"{settings.losses.weights[t]:g}" for t in MULTITASK),
            "sst_acc": f"{s['sst']:.4f}", "quora_acc": f"{s['quora']:.4f}", "sts_r": f"{s['sts']:.4f}",
            "mean": f"{multitask_mean(s):.4f}", "best_epoch": best_epoch, "minutes": f"{minutes:.1f}"}


def run_multitask(settings, on_epoch=None):
    """Part 2 as multitask_classifier.py runs it: --eval_only re-scores a checkpoint; otherwise a run folder,
    the outputs checked against the inputs before anything trains, then training."""
    outputs = [(f"--{TASK_PREFIX[t]}_{x}_out", settings.published[t, x]) for t in MULTITASK for x in ("dev", "test")]
    splits = ("dev", "test") if settings.eval_only else SPLITS
    by_flag = data_paths_by_flag(settings, splits)
    for flag, path in by_flag.items():  # each there before any is read; a typed one named by its flag
        require_data_file(path, flag if flag.split()[0].lstrip("-") in settings.run.typed else None)
    inputs = [(f"the {flag} data file", path) for flag, path in by_flag.items()]
    if settings.eval_only:  # a run folder of its own: the checkpoint's run keeps the files it wrote
        with open_run("eval", None, settings.run.name, settings.run.dir) as run:
            check_outputs(files=outputs, inputs=inputs + [("the --eval_only "
                                                           "checkpoint", settings.eval_only)], own=run.folder,
                          backup=settings.run.backup, typed=settings.run.typed)
            return rescore_part2(settings, run)
    note_split_overlap(settings)
    stem = settings.run.stem or "multitask"
    with open_run("multitask", [stem], settings.run.name, settings.run.dir, settings.run.resume) as run:
        files = run.files(stem)
        check_table(settings.results, RESULTS_TABLE, "--results", settings.results_given)
        check_outputs(files=outputs, tables=[("--results", settings.results)], own=run.folder,
                      backup=settings.run.backup, typed=settings.run.typed,
                      inputs=inputs + files.as_inputs())
        return train_part2(settings, run, on_epoch)
