"""The epoch protocol every pipeline shares (classifier.py, multitask_classifier.py, pretrain.py): `fit`
trains a Pipeline epoch by epoch and, after each one, scores it on dev, keeps the best checkpoint and a
resumable one, writes the log line and applies early stopping (`save_epoch`); `--resume` continues exactly
where the last epoch ended (`resume`). At the end the best epoch is reloaded and the pipeline writes its
outputs (`finish`)."""
import contextlib
import math
import time

import torch

from minbert.cli import MinbertError, is_main, main_print, set_interrupt_hint
from minbert.files import append_jsonl, deferred_interrupt, plain
from minbert.finetuning.modes import merge_for_inference
from minbert.runs.checkpoint import (load_checkpoint, load_trainable_state, model_record, rng_state, save_checkpoint,
                                     set_rng_state)
from minbert.runs.identity import check_same_run, run_defining
from minbert.runs.publishing import publish
from minbert.training.monitor import TensorBoard
from minbert.training.trainer import Diverged
from utils import barrier, distributed


class EarlyStopping:
    """Stop when the dev score has not improved for `patience` epochs (0: never stop)."""

    def __init__(self, patience, best=-math.inf, best_epoch=-1, waited=0):
        self.patience, self.best, self.best_epoch, self.waited = patience, best, best_epoch, waited

    def update(self, score, epoch):
        """Record an epoch's dev score; True if it is the best so far."""
        if score > self.best:
            self.best, self.best_epoch, self.waited = score, epoch, 0
            return True
        self.waited += 1
        return False

    @property
    def should_stop(self):
        return bool(self.patience) and self.waited >= self.patience

    def reason(self, what="dev score"):
        return (f"stopping early: the {what} has not improved for {self.waited} epoch(s) since epoch "
                f"{self.best_epoch} ({self.best:.4f}), --patience {self.patience}")

    def state_dict(self):
        return {"best": self.best, "best_epoch": self.best_epoch, "waited": self.waited}

    def load_state_dict(self, state):
        self.best, self.best_epoch, self.waited = state["best"], state["best_epoch"], state["waited"]


def stop_signal(stop):
    """Rank 0's early-stopping decision, the same on every rank (a broadcast under DDP)."""
    rank, world = distributed()
    if world == 1:
        return stop
    flag = torch.tensor([int(stop)])
    torch.distributed.broadcast(flag, src=0)
    return bool(flag.item())


class Pipeline:
    """What a pipeline gives `fit`: its model and loss, its data, how it scores an epoch and what it writes
    at the end. Everything else (ranks, checkpoints, resuming, early stopping, the log, publishing) is
    `fit`'s, the same for classifier.py, multitask_classifier.py and pretrain.py.

    Attributes: `kind` ('classifier', 'multitask', 'pretrain', ...), `file_stem` (the trained model's in the
    run folder), `inputs` ({what: path} of every file the run reads, whose bytes define it: runs/identity.py),
    `model`, `loss` (an objectives.losses.TermLoss), `spec` (specs.ModelSpec, or None), `score_name` (what the
    dev score is), `merge` (fold adapters before the final predictions)."""
    kind, spec, score_name, merge = "train", None, "dev score", False
    file_stem, inputs = "model", {}
    # the flags besides --lr that scale this pipeline's loss, for the advice to a run that diverged
    loss_scales = ""

    def steadier(self):
        """What a run that diverged is advised, in the flags its script takes: a lower --lr (or a smaller weight
        on the loss), and clipping where the run does not clip yet."""
        clip = "" if self.settings.recipe.max_grad_norm else ", or add --max_grad_norm 1.0"
        return f"lower --lr{self.loss_scales}{clip}"

    def batches(self, epoch):
        """(iterable of host batches, number of steps, {extra log fields}) of one epoch."""
        raise NotImplementedError

    def evaluate(self):
        """({metric: value} on dev, the dev score early stopping and the best checkpoint follow)."""
        raise NotImplementedError

    def describe(self, metrics):
        """The dev part of an epoch's printed line."""
        return ", ".join(f"dev {k} {v:.3f}" for k, v in metrics.items())

    def write_outputs(self, files, best):
        """After the best epoch is reloaded: write the run's outputs; returns (result, [(file, published path)])."""
        raise NotImplementedError

    def state_dict(self):
        """The data order's state at an epoch's end (what a resumed run must continue from)."""
        return {}

    def load_state_dict(self, state):
        pass


def loss_state(loss):
    """The loss's own state (a Bregman teacher's weights), for the resumable checkpoint."""
    return {k: v.detach().clone() for k, v in loss.state_dict().items()}


def checkpoint_record(pipeline, files, run_name, flags, epoch, metrics):
    """The fields every checkpoint of a run carries beside its tensors (runs/checkpoint.py)."""
    return model_record(pipeline.kind, pipeline.spec, pipeline.model, epoch, metrics, run_name, files.stem, flags)


def diverged(e, pipeline, files, run_name, epoch, stopper):
    """The one-line error of a run whose weights diverged in `epoch`, after a line in its log saying so."""
    if is_main():
        append_jsonl(files.log, {"run": run_name, "pipeline": pipeline.kind, "model": files.stem,
                                 "epoch": epoch, "stopped": str(e)})
    kept = (f"; epoch {stopper.best_epoch}, the best before it, is kept in {files.best}"
            if stopper.best_epoch >= 0 else "")
    return Diverged(f"{files.stem} epoch {epoch}: {e}; {pipeline.steadier()}{kept}")


def fit(pipeline, trainer, run, settings, on_epoch=None):
    """Train `pipeline` with `trainer` in the open run folder `run` (runs/folders.Run) for
    settings.recipe.epochs, keep its best dev epoch, and write its outputs from that epoch.

    settings.run.resume continues from the last completed epoch (`resume`). After every epoch (rank 0
    evaluates and writes; other ranks wait for it): the dev score, early stopping (settings.recipe.patience),
    the epoch's checkpoints and log line (`save_epoch`), the interrupt hint and `on_epoch(epoch, dev score)`
    (sweep.py's pruner may raise there). With settings.runtime.tensorboard, rank 0 also writes event files
    into the run folder (monitor.py). At the end (`finish`): the best epoch reloaded, adapters merged
    (--merge), outputs written and published. Returns the pipeline's result (rank 0) or None (other ranks)."""
    files, run_name, epochs = run.files(pipeline.file_stem), run.name, settings.recipe.epochs
    flags = run_defining(settings.run.flags, pipeline.inputs)
    retry = resume_command(settings.run, run)
    stopper = EarlyStopping(settings.recipe.patience)
    start = resume(pipeline, trainer, stopper, files, flags, epochs) if settings.run.resume else 0
    run.note_flags(files.stem, flags)  # (after resume's check: a refused resumption leaves the record as it was)
    interrupt_hint(files, start - 1, retry)
    monitor = (TensorBoard(files.folder / f"tb-{files.stem}")
               if settings.runtime.tensorboard and is_main() and start < epochs else None)
    spent = TimeSpent()
    for epoch in range(start, epochs):
        batches, steps, info = pipeline.batches(epoch)
        if not steps:
            break
        try:
            stats = trainer.run_epoch(batches, steps, desc=f"{files.stem} epoch {epoch}",
                                      on_step=monitor.step if monitor is not None else None)
        except Diverged as e:
            raise diverged(e, pipeline, files, run_name, epoch, stopper) from None
        terms = pipeline.loss.pop_terms()
        spent.add("training", stats["seconds"])
        if not is_main():  # rank 0 alone evaluates, saves and logs; the others wait for it
            barrier()
            if stop_signal(False):
                break
            continue
        t0 = time.perf_counter()
        metrics, score = pipeline.evaluate()
        dev_seconds = time.perf_counter() - t0
        spent.add("dev evaluation", dev_seconds)
        if score != score:
            raise diverged(Diverged(f"the {pipeline.score_name} is NaN (the model's outputs are not "
                                    "numbers): the weights diverged"),
                           pipeline, files, run_name, epoch, stopper) from None
        best = stopper.update(score, epoch)
        with spent("checkpoints"):
            entry = save_epoch(pipeline, trainer, stopper, files, run_name, flags, epoch, retry,
                               {"train_loss": stats["train_loss"], "loss_terms": terms, "dev": metrics,
                                "dev_score": score, "score_name": pipeline.score_name, "best": best,
                                "seconds": stats["seconds"], "tokens_per_s": stats["tokens_per_s"],
                                "lr": stats["lr"], "steps": stats["steps"], **stats["surgery"], **info,
                                "dev_seconds": dev_seconds})
        if monitor is not None:
            monitor.epoch(trainer.batches, entry)
        speed = (f"{stats['tokens_per_s']:.0f} tokens/s" if stats["tokens_per_s"]
                 else "head on cached features")
        print(f"{files.stem} epoch {epoch}: train loss {stats['train_loss']:.3f}, "
              f"{pipeline.describe(metrics)}, {stats['seconds']:.0f}s, "
              f"{speed}" + ("" if best else f" (best so far: epoch {stopper.best_epoch})"))
        if on_epoch is not None:
            on_epoch(epoch, score)
        barrier()
        if stop_signal(stopper.should_stop):
            print(f"{files.stem}: {stopper.reason(pipeline.score_name)}")
            append_jsonl(files.log, {"run": run_name, "pipeline": pipeline.kind, "model": files.stem,
                                     "epoch": epoch, "stopped": stopper.reason(pipeline.score_name)})
            break
    if monitor is not None:
        monitor.close()
    if not is_main():
        return None
    done = run.finished(files.stem, settings) if settings.run.resume and start >= epochs else None
    if done is not None:  # finished before: its files are published again as they are, never scored again
        publish(done["published"], run_name, files.folder)
        return done["result"]
    with spent("final outputs"):
        result = finish(pipeline, run, settings, files, stopper, retry)
    print(f"{files.stem}: where this run's {spent.total:.1f}s of epochs and outputs went: {spent}")
    return result


class TimeSpent:
    """Seconds spent per part of a run (training, dev evaluation, checkpoints, final outputs), for the line at
    its end that says where the time went: what to look at when a run takes longer than its steps do."""

    def __init__(self):
        self.seconds = {}

    def add(self, part, seconds):
        self.seconds[part] = self.seconds.get(part, 0.0) + seconds

    @contextlib.contextmanager
    def __call__(self, part):
        t0 = time.perf_counter()
        yield
        self.add(part, time.perf_counter() - t0)

    @property
    def total(self):
        return sum(self.seconds.values())

    def __str__(self):
        return ", ".join(f"{part} {s:.1f}s" for part, s in self.seconds.items())


def resume(pipeline, trainer, stopper, files, flags, epochs):
    """--resume: everything the last completed epoch saved (files.last: the model's trainable weights, the
    trainer's optimizer, schedule and counts, the pipeline's data order, the loss's own state such as the
    Bregman teacher, early stopping, the random states) put back, after the run-defining flags `flags` are
    checked against the checkpoint's. Returns the epoch to start from (`epochs` when the run had stopped
    early; 0 when no epoch had finished)."""
    if not files.last.exists():
        main_print(f"--resume: no completed epoch of {files.stem} in {files.folder}; starting at epoch 0")
        return 0
    state = load_checkpoint(files.last)
    if "trainer" not in state:
        raise MinbertError(f"{files.last}: not a resumable checkpoint (no optimizer state in it)")
    check_same_run(state["flags"], flags, files.last, log=main_print)
    load_trainable_state(pipeline.model, state["model"], files.last)
    trainer.load_state_dict(state["trainer"])
    pipeline.load_state_dict(state["pipeline_state"])
    pipeline.loss.load_state_dict(state["loss_state"])  # e.g. the Bregman step's teacher
    stopper.load_state_dict(state["stopper"])
    set_rng_state(state["rng"])
    main_print(f"resumed {files.stem} from {files.last} after epoch {state['epoch']}")
    return epochs if stopper.should_stop else state["epoch"] + 1  # a run stopped early trains no more


def resume_command(spec, run):
    """The command that continues `run`: the same command plus what it lacks of --resume and the flag naming
    the folder (a flag typed twice is refused, so a command that has them is not told to add them again)."""
    missing = ([] if spec.resume else ["--resume"]) + ([] if spec.name or spec.dir else [run.how])
    return f"the same command plus {' '.join(missing)}" if missing else "the same command"


def interrupt_hint(files, epoch, retry):
    """What an interrupted run is told (utils.main_guard): where epoch `epoch`, the last completed (-1:
    none), is saved, and `retry`, the command that continues the run."""
    if epoch >= 0:
        text = f"{files.stem} epoch {epoch} is saved in {files.last}; {retry} continues from there"
    else:
        text = f"{files.stem}: no epoch had finished, so nothing was saved; {retry} starts it again"
    set_interrupt_hint(text, retry=retry)


def save_epoch(pipeline, trainer, stopper, files, run_name, flags, epoch, retry, fields):
    """An epoch's files as one unit: the best checkpoint when the epoch is the best so far, the resumable
    one (files.last: the model, trainer.state_dict(), the random states, early stopping, the pipeline's data
    order, the loss's state), the log line (`fields` with the run's names, one schema for every pipeline) and
    the interrupt hint naming this epoch. Ctrl-C waits until all are written, so an interrupted run is never
    half-saved nor told the wrong epoch. Returns the log line."""
    with deferred_interrupt():
        record = checkpoint_record(pipeline, files, run_name, flags or {}, epoch, fields["dev"])
        if fields["best"]:
            save_checkpoint(files.best, record)
        save_checkpoint(files.last, {**record, "trainer": trainer.state_dict(), "rng": rng_state(),
                                     "stopper": stopper.state_dict(),
                                     "pipeline_state": pipeline.state_dict(),
                                     "loss_state": loss_state(pipeline.loss)})
        entry = {"run": run_name, "pipeline": pipeline.kind, "model": files.stem, "epoch": epoch, **fields}
        append_jsonl(files.log, plain(entry))
        interrupt_hint(files, epoch, retry)
    return entry


def finish(pipeline, run, settings, files, stopper, retry):
    """After the last epoch (rank 0): the best epoch reloaded, adapters merged (--merge), the pipeline's
    outputs written and published; returns its result. A best checkpoint that is missing is one line."""
    if not files.best.exists():
        if stopper.best_epoch >= 0:
            raise MinbertError(f"{files.best}: the checkpoint of the best epoch ({stopper.best_epoch}) is "
                               "missing (moved or deleted?), so no outputs can be "
                               f"written from it; the last epoch is in {files.last}")
        raise MinbertError(f"{files.best}: no epoch was trained, so "
                           "there is no best model to write outputs from")
    best = load_checkpoint(files.best)
    load_trainable_state(pipeline.model, best["model"], files.best)
    if pipeline.merge:
        merge_for_inference(pipeline.model.backbone, True, pipeline.spec.fine_tune_mode, main_print)
    result, published = pipeline.write_outputs(files, best)
    run.note_outputs(files.stem, result, published, settings)
    publish(published, run.name, files.folder)
    set_interrupt_hint(f"{files.stem} is complete in {files.folder}", retry=retry)
    return result
