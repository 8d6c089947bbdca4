"""The one training loop both pipelines share: autocast, fp16 loss scaling, gradient accumulation,
gradient clipping, a per-step learning-rate schedule, PCGrad for steps that hold every task,
DistributedDataParallel, batches prefetched on a background thread, a tqdm bar and tokens/s; and the
early-stopping rule both pipelines apply to their dev score."""
import math
import time

import torch
from tqdm.auto import tqdm

from monitor import TensorBoard
from pcgrad import pcgrad_combine, task_gradients_backward
from precision import autocast, grad_scaler
from utils import MinbertError, Progress, distributed, is_main, main_print, to_device


def count_tokens(batch):
    """Non-pad tokens in a batch (all its inputs; every part of a multi-task batch), counted on the host."""
    if "parts" in batch:
        return sum(count_tokens(b) for b in batch["parts"].values())
    return sum(int(v["attention_mask"].sum()) for v in batch.values() if isinstance(v, dict) and "attention_mask" in v)


def prefetch(batches, device, depth=3):
    """Build the next batches on a background thread while the model works on this one (and pin them,
    so a GPU copy can overlap compute). Order is unchanged, so runs stay repeatable."""
    import queue
    import threading
    q, done = queue.Queue(depth), object()

    def work():
        try:
            for b in batches:
                q.put(pin(b) if device.type == "cuda" else b)
        except BaseException as e:  # handed over to the consumer, raised there
            q.put(e)
        q.put(done)
    threading.Thread(target=work, daemon=True).start()
    while (item := q.get()) is not done:
        if isinstance(item, BaseException):
            raise item
        yield item


def pin(batch):
    if isinstance(batch, dict):
        return {k: pin(v) for k, v in batch.items()}
    return batch.pin_memory() if torch.is_tensor(batch) else batch


class Trainer:
    """One optimizer step path for both pipelines: autocast, fp16 loss scaling, gradient accumulation
    over `grad_accum` batches, a tqdm bar, and tokens/s."""

    def __init__(self, model, optimizer, device, amp="none", grad_accum=1, scheduler=None, max_grad_norm=0.0,
                 pcgrad=False, seed=0, gradvac=None):
        """`pcgrad` or `gradvac` (a gradvac.GradVaccine) combine the task gradients of a step holding every task."""
        self.model, self.optimizer, self.device, self.amp = model, optimizer, device, amp
        self.grad_accum, self.scheduler, self.max_grad_norm = grad_accum, scheduler, max_grad_norm
        self.gradvac = gradvac
        self.surgery = "pcgrad" if pcgrad else "gradvac" if gradvac is not None else None
        self.scaler = grad_scaler(device, amp)
        self.loss_module = _LossModule(model)
        self.world_size = distributed()[1]
        self.generator = torch.Generator().manual_seed(seed)  # PCGrad's task order, repeatable
        self.progress_every = 60.0  # seconds between plain progress lines when there is no terminal
        self.on_step, self.log_every = None, 20  # on_step(batches, loss, lr) every log_every batches (TensorBoard)
        self.batches = 0  # training batches since the run started (saved with the state, so a resumed run goes on)
        self.updates = 0  # optimizer steps taken (saved too); step_hooks are called with it after each one
        self.step_hooks = []
        if self.surgery and self.world_size > 1:
            raise MinbertError(f"--{self.surgery} under DDP is not supported: per-task gradients would each need their "
                               f"own all-reduce; run it in one process")
        if self.world_size > 1:
            from torch.nn.parallel import DistributedDataParallel as DDP
            # DDP syncs gradients for whatever runs through its forward, so the loss itself goes through
            # it; a multitask step leaves the other heads unused, hence find_unused_parameters.
            self.loss_module = DDP(self.loss_module, device_ids=[device.index] if device.type == "cuda" else None,
                                   find_unused_parameters=True)

    def run_epoch(self, batches, loss_fn, total, desc="train"):
        """`loss_fn(model, batch)` returns a scalar loss, or {task: loss} for a batch holding every task
        (summed, or combined by PCGrad); `batches` yields batch dicts (on the host)."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.after_step = getattr(loss_fn, "after_step", None)  # e.g. the Bregman teacher's update
        self.conflicts = 0
        for hook in self.step_hooks:  # e.g. gradual unfreezing, at the step count this epoch starts from
            hook(self.updates)
        loss_sum = torch.zeros((), device=self.device)
        tokens, steps, t0 = 0, 0, time.perf_counter()
        bar = tqdm(prefetch(batches, self.device), total=total, desc=desc, disable=None, leave=False)
        progress = Progress(desc, total, self.progress_every, terminal=not bar.disable)
        for i, batch in enumerate(bar):
            tokens += count_tokens(batch)
            batch = to_device(batch, self.device)
            with autocast(self.device, self.amp):
                loss = self.loss_module(loss_fn, batch)
            if isinstance(loss, dict) and self.surgery:  # every task's batch in this step: gradient surgery
                self.conflicts += task_gradients_backward([l / self.grad_accum for l in loss.values()], self.params,
                                                          self.combine, self.scaler)
                loss = sum(loss.values())
            else:
                if isinstance(loss, dict):  # every task's batch, losses summed (one process only: weight 1)
                    loss, weight = sum(loss.values()), 1.0
                else:
                    # A rank holds `local` of the global batch's examples; DDP averages over ranks, so this
                    # weight makes the result the global batch's mean even when the last batch splits unevenly.
                    weight = 0.0 if batch.get("ghost") else (
                        len(batch["index"]) * self.world_size / batch.get("global_size", len(batch["index"])))
                self.scaler.scale(loss * (weight / self.grad_accum)).backward()
            loss_sum += loss.detach().float()
            steps += 1
            pending = steps % self.grad_accum != 0
            if not pending:
                self.step()
            if steps % 50 == 0:  # a host sync, so not every step
                mean = loss_sum.item() / steps
                self.check_finite(mean, steps, total)
                bar.set_postfix(loss=f"{mean:.4f}")
            self.batches += 1
            if self.on_step is not None and self.batches % self.log_every == 0:
                self.on_step(self.batches, loss.detach().float().item(), self.optimizer.param_groups[0]["lr"])
            progress.update(steps, tokens, lambda: loss_sum.item() / steps)
        if steps and pending:  # the epoch ended inside an accumulation group
            self.step()
        seconds = time.perf_counter() - t0
        self.check_finite(loss_sum.item() / max(steps, 1), steps, total)
        stats = {"train_loss": loss_sum.item() / max(steps, 1), "steps": steps, "seconds": seconds,
                 "tokens_per_s": tokens / seconds if seconds else 0.0,
                 "lr": self.optimizer.param_groups[0]["lr"]}
        if self.surgery:
            stats[SURGERY_STAT[self.surgery]] = self.conflicts
        return stats

    def combine(self, grads):
        """The step's task gradients combined by --pcgrad or --gradvac: (gradient, count for the log)."""
        if self.surgery == "pcgrad":
            return pcgrad_combine(grads, self.generator)
        return self.gradvac.combine(grads, self.generator)

    def check_finite(self, mean_loss, steps, total):
        """Stop at a training loss that is NaN or infinite: the weights are then no longer numbers, every later
        step would be wasted, and no epoch could be kept. Under fp16 the grad scaler skips the steps whose
        gradients overflow, so there a non-finite loss is not yet divergence (the dev score tells, in fit)."""
        if math.isfinite(mean_loss) or self.scaler.is_enabled():
            return
        peak = max(g.get("initial_lr", g["lr"]) for g in self.optimizer.param_groups)  # the schedule's base rate
        raise Diverged(f"the training loss became {'NaN' if mean_loss != mean_loss else 'infinite'} by step {steps} "
                       f"of {total} (peak learning rate {peak:g}): the weights diverged, so training stopped; lower "
                       f"--lr, or add --max_grad_norm 1.0")

    def state_dict(self):
        """Everything of the optimisation a resumed run needs: optimizer, schedule, fp16 grad scaler, and the
        generator PCGrad draws its task order from."""
        return {"optimizer": self.optimizer.state_dict(),
                "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
                "scaler": self.scaler.state_dict(), "generator": self.generator.get_state(), "batches": self.batches,
                "updates": self.updates, "gradvac": self.gradvac.state_dict() if self.gradvac is not None else None}

    def load_state_dict(self, state):
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        if state["scaler"]:
            self.scaler.load_state_dict(state["scaler"])
        self.generator.set_state(state["generator"])
        self.batches = state["batches"]
        self.updates = state.get("updates", self.batches // self.grad_accum)  # earlier checkpoints kept batches only
        if self.gradvac is not None:
            self.gradvac.load_state_dict(state["gradvac"])

    def step(self):
        if self.max_grad_norm:
            self.scaler.unscale_(self.optimizer)  # clip the true gradients, not the fp16-scaled ones
            torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        if self.scheduler is not None:
            self.scheduler.step()
        self.updates += 1
        for hook in self.step_hooks:
            hook(self.updates)
        if getattr(self, "after_step", None) is not None:
            self.after_step()


# The per-epoch log field counting what the gradient surgery did.
SURGERY_STAT = {"pcgrad": "pcgrad_conflicts", "gradvac": "gradvac_adjustments"}


class Diverged(MinbertError):
    """The weights are no longer numbers (a NaN or infinite loss or dev score)."""


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


class _LossModule(torch.nn.Module):
    """model + loss function as one module, so DistributedDataParallel sees the whole step."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, loss_fn, batch):
        return loss_fn(self.model, batch)


def build_trainer(model, args, device, steps_per_epoch, epochs=None, tasks=()):
    """The --optimizer over `model`'s trainable parameters (grouped by layer-wise rate when --llrd < 1), the
    --scheduler over all of the run's optimizer steps (`epochs`, default --epochs, of `steps_per_epoch`
    batches), --freeze_layers and --gradual_unfreeze (freezing.py), and the Trainer that steps them; with
    --pcgrad or --gradvac it combines the gradients of `tasks` (Part 2)."""
    from freezing import frozen_parameters, setup_freezing
    from gradvac import GradVaccine
    from optimizer import make_optimizer
    from schedule import make_scheduler, param_groups
    unfreeze = setup_freezing(model.bert, args.freeze_layers, args.gradual_unfreeze, main_print)
    groups = param_groups(model, args.lr, args.llrd, args.head_lr, args.weight_decay)
    describe_trainable(model, args.optimizer, frozen_parameters(model.bert, args.freeze_layers))
    optimizer = make_optimizer(args.optimizer, groups, args.lr, args.weight_decay, args.foreach)
    total = (epochs or args.epochs) * -(-steps_per_epoch // args.grad_accum)
    scheduler = make_scheduler(optimizer, args.scheduler, args.warmup_ratio, total)
    gradvac = GradVaccine(len(tasks), args.gradvac_beta) if getattr(args, "gradvac", False) else None
    trainer = Trainer(model, optimizer, device, args.amp, args.grad_accum, scheduler=scheduler,
                      max_grad_norm=args.max_grad_norm, pcgrad=getattr(args, "pcgrad", False), seed=args.seed,
                      gradvac=gradvac)
    if unfreeze is not None:
        trainer.step_hooks.append(unfreeze)
    return trainer


def describe_trainable(model, optimizer="adamw", frozen=()):
    """Print (and return) how many parameters train and what the optimizer's state for them costs (AdamW and
    LAMB keep two tensors the size of each parameter, Lion one). `frozen`: parameters that never receive a
    gradient although they require one (--freeze_layers)."""
    from optimizer import OPTIMIZERS, STATE_TENSORS
    params, frozen = list(model.parameters()), {id(p) for p in frozen}
    trainable = [p for p in params if p.requires_grad and id(p) not in frozen]
    n, total = sum(p.numel() for p in trainable), sum(p.numel() for p in params)
    state_bytes = STATE_TENSORS[optimizer] * sum(p.numel() * p.element_size() for p in trainable)
    name = OPTIMIZERS[optimizer].__name__
    main_print(f"trainable parameters: {n:,} of {total:,} ({100 * n / max(total, 1):.2f}%); "
               f"{name} state {state_bytes / 2**20:.1f} MiB")
    return {"trainable": n, "total": total, "optimizer_state_bytes": state_bytes}


def stop_signal(stop):
    """Rank 0's early-stopping decision, the same on every rank (a broadcast under DDP)."""
    rank, world = distributed()
    if world == 1:
        return stop
    flag = torch.tensor([int(stop)])
    torch.distributed.broadcast(flag, src=0)
    return bool(flag.item())


# ----------------------------------------------------------------------------- the epoch protocol

class Pipeline:
    """What a pipeline gives `fit`: its model and loss, its data, how it scores an epoch and what it writes
    at the end. Everything else (ranks, checkpoints, resuming, early stopping, the log, publishing) is
    `fit`'s, the same for classifier.py, multitask_classifier.py and pretrain.py.

    Attributes: `kind` ('classifier', 'multitask', 'pretrain'), `model`, `loss` (a losses.TermLoss or any
    callable(model, batch)), `spec` (checkpoint.ModelSpec, or None), `score_name` (what the dev score is),
    `merge` (fold adapters before the final predictions)."""
    kind, spec, score_name, merge = "train", None, "dev score", False

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
    return {k: v.detach().clone() for k, v in loss.state_dict().items()} if isinstance(loss, torch.nn.Module) else {}


def checkpoint_record(pipeline, files, run_name, flags, epoch, metrics):
    """The fields every checkpoint of a run carries beside its tensors (checkpoint.py)."""
    from checkpoint import FORMAT, VERSION, trainable_state
    return {"format": FORMAT, "version": VERSION, "pipeline": pipeline.kind,
            "spec": pipeline.spec.to_dict() if pipeline.spec is not None else None,
            "model": trainable_state(pipeline.model), "epoch": epoch, "scores": metrics, "run": run_name,
            "model_name": files.stem, "flags": flags}


def diverged(e, pipeline, files, run_name, epoch, stopper):
    """The one-line error of a run whose weights diverged in `epoch`, after a line in its log saying so."""
    from utils import append_jsonl
    if is_main():
        append_jsonl(files.log, {"run": run_name, "pipeline": pipeline.kind, "model": files.stem, "epoch": epoch,
                                 "stopped": str(e)})
    kept = (f"; epoch {stopper.best_epoch}, the best before it, is kept in {files.best}"
            if stopper.best_epoch >= 0 else "")
    return Diverged(f"{files.stem} epoch {epoch}: {e}{kept}")


def fit(pipeline, trainer, files, run_name, epochs, patience=0, resume=False, flags=None, on_epoch=None,
        continue_hint="", tensorboard=True):
    """Train `pipeline` for `epochs`, keep its best dev epoch, and write its outputs from that epoch.

    After every epoch (rank 0 evaluates and writes; other ranks wait for it): the dev score, early stopping,
    the best checkpoint (files.best) and the resumable one (files.last: model, optimizer, schedule, grad
    scaler, random states, the pipeline's data order, early stopping), a line in the log (files.log, one
    schema for every pipeline), the interrupt hint and `on_epoch(epoch, dev score)` (sweep.py's pruner may
    raise there). `resume` continues from files.last when there is one; `flags` are the run-defining flags,
    which must agree with the checkpoint's. With `tensorboard`, rank 0 also writes event files into the run
    folder (monitor.py). At the end: the best epoch reloaded, adapters merged (--merge), outputs written and
    published. Returns the pipeline's result (rank 0) or None (other ranks)."""
    from checkpoint import load_checkpoint, load_trainable_state, plain, rng_state, save_checkpoint, set_rng_state
    from flags import check_same_run
    from finetune import merge_for_inference
    from runs import publish
    from utils import append_jsonl, barrier, deferred_interrupt, set_interrupt_hint
    model, stopper, start = pipeline.model, EarlyStopping(patience), 0
    if resume and files.last.exists():
        state = load_checkpoint(files.last)
        if "trainer" not in state:
            raise MinbertError(f"{files.last}: not a resumable checkpoint (no optimizer state in it)")
        check_same_run(state["flags"], flags or {}, files.last, log=main_print)
        load_trainable_state(model, state["model"], files.last)
        trainer.load_state_dict(state["trainer"])
        pipeline.load_state_dict(state["pipeline_state"])
        if isinstance(pipeline.loss, torch.nn.Module):  # e.g. the Bregman step's teacher
            pipeline.loss.load_state_dict(state["loss_state"])
        stopper.load_state_dict(state["stopper"])
        set_rng_state(state["rng"])
        start = state["epoch"] + 1
        main_print(f"resumed {files.stem} from {files.last} after epoch {state['epoch']}")
        if stopper.should_stop:
            start = epochs  # the run had stopped early: nothing left to train
    elif resume:
        main_print(f"--resume: no completed epoch of {files.stem} in {files.folder}; starting at epoch 0")
    set_interrupt_hint(f"{files.stem} epoch {start - 1} is saved in {files.last}; {continue_hint} continues from there"
                       if start else f"{files.stem}: no epoch had finished, so nothing was saved; {continue_hint} "
                                     f"starts it again", retry=continue_hint)
    monitor = TensorBoard(files.folder / f"tb-{files.stem}") if tensorboard and is_main() and start < epochs else None
    if monitor is not None:
        trainer.on_step = monitor.step
    for epoch in range(start, epochs):
        batches, steps, info = pipeline.batches(epoch)
        if not steps:
            break
        try:
            stats = trainer.run_epoch(batches, pipeline.loss, steps, desc=f"{files.stem} epoch {epoch}")
        except Diverged as e:
            raise diverged(e, pipeline, files, run_name, epoch, stopper) from None
        terms = pipeline.loss.pop_terms() if hasattr(pipeline.loss, "pop_terms") else {}
        if not is_main():  # rank 0 alone evaluates, saves and logs; the others wait for it
            barrier()
            if stop_signal(False):
                break
            continue
        metrics, score = pipeline.evaluate()
        if score != score:
            raise diverged(Diverged(f"the {pipeline.score_name} is NaN (the model's outputs are not numbers): the weights "
                                    f"diverged; lower --lr, or add --max_grad_norm 1.0"),
                           pipeline, files, run_name, epoch, stopper) from None
        best = stopper.update(score, epoch)
        # The epoch's files as one unit: Ctrl-C waits until both checkpoints and the log line are written and the
        # interrupt hint names this epoch, so an interrupted run is never half-saved nor told the wrong epoch.
        with deferred_interrupt():
            record = checkpoint_record(pipeline, files, run_name, flags or {}, epoch, metrics)
            if best:
                save_checkpoint(files.best, record)
            save_checkpoint(files.last, {**record, "trainer": trainer.state_dict(), "rng": rng_state(),
                                         "stopper": stopper.state_dict(), "pipeline_state": pipeline.state_dict(),
                                         "loss_state": loss_state(pipeline.loss)})
            entry = {"run": run_name, "pipeline": pipeline.kind, "model": files.stem, "epoch": epoch,
                     "train_loss": stats["train_loss"], "loss_terms": terms, "dev": metrics, "dev_score": score,
                     "score_name": pipeline.score_name, "best": best, "seconds": stats["seconds"],
                     "tokens_per_s": stats["tokens_per_s"], "lr": stats["lr"], "steps": stats["steps"],
                     **{k: v for k, v in stats.items() if k in SURGERY_STAT.values()}, **info}
            append_jsonl(files.log, plain(entry))
            set_interrupt_hint(f"{files.stem} epoch {epoch} is saved in {files.last}; {continue_hint} continues from there",
                               retry=continue_hint)
        if monitor is not None:
            monitor.epoch(trainer.batches, entry)
        speed = f"{stats['tokens_per_s']:.0f} tokens/s" if stats["tokens_per_s"] else "head on cached features"
        print(f"{files.stem} epoch {epoch}: train loss {stats['train_loss']:.3f}, {pipeline.describe(metrics)}, "
              f"{stats['seconds']:.0f}s, {speed}" + ("" if best else f" (best so far: epoch {stopper.best_epoch})"))
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
    if not files.best.exists():
        if stopper.best_epoch >= 0:
            raise MinbertError(f"{files.best}: the checkpoint of the best epoch ({stopper.best_epoch}) is missing (moved or "
                               f"deleted?), so no outputs can be written from it; the last epoch is in {files.last}")
        raise MinbertError(f"{files.best}: no epoch was trained, so there is no best model to write outputs from")
    best = load_checkpoint(files.best)
    load_trainable_state(model, best["model"], files.best)
    if pipeline.merge:
        merge_for_inference(model.bert, True, pipeline.spec.fine_tune_mode, main_print)
    result, published = pipeline.write_outputs(files, best)
    publish(published, run_name, files.folder)
    set_interrupt_hint(f"{files.stem} is complete in {files.folder}", retry=continue_hint)
    return result
