"""The training loop every pipeline shares: an epoch over the batches (prefetched on a background thread,
prefetch.py) through the one training step (step.py: autocast, the loss, backward with fp16 loss scaling and
gradient surgery, clipping, the optimizer, the schedule, the loss's after-step), run eagerly with gradient
accumulation and DistributedDataParallel, or recorded as CUDA graphs and replayed (recorded.py); a tqdm bar
and tokens/s; and `build_trainer`, which makes the optimizer, schedule and freezing a Recipe asks for. The
epoch protocol around it (checkpoints, resuming, early stopping, the log) is fit.py's."""
import dataclasses
import math
import time

import torch
from tqdm.auto import tqdm

from datasets import set_fixed_shapes
from minbert.cli import MinbertError, Progress, main_print
from minbert.embedding_grad import Embedding
from minbert.finetuning.freezing import frozen_parameters, setup_freezing
from minbert.objectives.gradvac import GradVaccine
from minbert.objectives.pcgrad import PCGrad
from minbert.specs import Recipe, Runtime
from minbert.training import schedule
from minbert.training.prefetch import prefetch
from minbert.training.recorded import RecordedStep, RecordingFailed, cannot_record
from minbert.training.step import TrainingStep
from optimizer import OPTIMIZERS, STATE_TENSORS, make_optimizer, portable_state
from utils import distributed, to_device


def count_tokens(batch):
    """Non-pad tokens in a batch (all its inputs; every part of a multi-task batch; not a fixed-shape batch's
    filler rows), counted on the host."""
    if "parts" in batch:
        return sum(count_tokens(b) for b in batch["parts"].values())
    real = batch["weight"] > 0 if "weight" in batch else slice(None)
    return sum(int(v["attention_mask"][real].sum()) for v in batch.values()
               if isinstance(v, dict) and "attention_mask" in v)


class Trainer:
    """The epoch loop around the one training step (step.py), built whole from its parts: the model, the loss
    it minimises (an objectives.losses.TermLoss, given once, here), its optimizer and schedule, the recipe
    (gradient accumulation, clipping, the seed of PCGrad's task order) and the runtime (device, precision,
    the step eager or recorded: recorded.py), the gradient surgery of a step holding every task
    (objectives/pcgrad.PCGrad or objectives/gradvac.GradVaccine) and the hooks called after every optimizer
    step with the count of steps taken (--gradual_unfreeze). `build_trainer` makes all of them from a
    Recipe."""

    def __init__(self, model, loss_fn, optimizer, recipe=None, runtime=None, scheduler=None, surgery=None,
                 step_hooks=(), progress_every=60.0):
        """`recipe` and `runtime` default to specs.Recipe's and specs.Runtime's defaults (one plain CPU step)."""
        recipe, runtime = recipe or Recipe(lr=0.0), runtime or Runtime()
        self.model, self.loss_fn, self.optimizer, self.scheduler = model, loss_fn, optimizer, scheduler
        self.surgery, self.device, self.grad_accum = surgery, runtime.device, recipe.grad_accum
        self.step_hooks = tuple(step_hooks)
        self.progress_every = progress_every  # seconds between plain progress lines when there is no terminal
        self.world_size = distributed()[1]
        self.generator = torch.Generator().manual_seed(recipe.seed)  # PCGrad's task order, repeatable
        # training batches since the run started (saved with the state, so a resumed run goes on)
        self.batches = 0
        self.updates = 0  # optimizer steps taken (saved too); step_hooks are called with it after each one
        # per-task gradients come from torch.autograd.grad, which needs autograd's accumulation
        if surgery is not None:
            for m in model.modules():
                if isinstance(m, Embedding):
                    m.reuse_grad = False
        if surgery is not None and self.world_size > 1:
            raise MinbertError(f"--{surgery.flag} under DDP is not supported: per-task gradients would each "
                               "need their own all-reduce; run it in one process")
        loss_module = None  # the step calls loss_fn(model, batch)
        if self.world_size > 1:
            from torch.nn.parallel import DistributedDataParallel as DDP
            # DDP syncs gradients for whatever runs through its forward, so the loss itself goes through
            # it; a multitask step leaves the other heads unused, hence find_unused_parameters.
            devices = [self.device.index] if self.device.type == "cuda" else None
            loss_module = DDP(_LossModule(model), device_ids=devices, find_unused_parameters=True)
        self.step = TrainingStep(model, loss_fn, optimizer, scheduler, self.device, runtime.amp,
                                 recipe.max_grad_norm, self.grad_accum, surgery, self.generator,
                                 self.world_size, forward=loss_module)
        self.recorded = None  # recorded.RecordedStep when the step is recorded, else the eager step runs
        if runtime.record_step:
            # the step as built: the optimizer and surgery objects given, whatever the recipe names (a test or a
            # tool may build a Trainer with its own)
            built = dataclasses.replace(recipe, optimizer=optimizer_name(optimizer),
                                        surgery=surgery.flag if surgery is not None else None)
            why = cannot_record(built, runtime.amp, self.world_size)
            if why:
                raise MinbertError(f"the recorded training step cannot take {why[0]}: run it with "
                                   "--no_record_step")
            self.recorded = RecordedStep(self.step)

    @property
    def params(self):
        """The parameters that train now (--gradual_unfreeze changes them between epochs)."""
        return self.step.params

    def run_epoch(self, batches, total, desc="train", on_step=None, log_every=20):
        """One pass over `batches` (batch dicts on the host); returns its statistics. `on_step(batches, loss,
        lr)` gets the loss and learning rate of every `log_every`-th batch (TensorBoard), read back from the
        device together with the mean loss every 50 steps and at the epoch's end, not one sync each."""
        self.model.train()
        for hook in self.step_hooks:  # e.g. gradual unfreezing, at the step count this epoch starts from
            hook(self.updates)
        if self.recorded is None:  # (the recorded step starts and ends with no gradients)
            self.step.zero_grad()
        shapes = self.recorded_shapes()
        loss_sum = torch.zeros((), device=self.device)
        logged = []  # (batch count, loss, lr) for on_step, each still on the device until read back
        tokens, steps, conflicts, t0 = 0, 0, 0, time.perf_counter()
        mean = None  # the mean loss as last read back (every 50 steps): the progress line shows it, no sync of its own
        bar = tqdm(prefetch(batches, self.device), total=total, desc=desc, disable=None, leave=False)
        progress = Progress(desc, total, self.progress_every, terminal=not bar.disable)
        for batch in bar:
            tokens += count_tokens(batch)
            last = (steps + 1) % self.grad_accum == 0  # this batch ends an accumulation group
            loss, n = self.train_batch(batch, last, desc)
            if last:
                self.count_update()
            conflicts += n
            loss_sum += loss.detach().float()
            steps += 1
            self.batches += 1
            if on_step is not None and self.batches % log_every == 0:
                # copies: a recorded step's loss and a device schedule's rate are rewritten by the next step
                lr = self.optimizer.param_groups[0]["lr"]
                logged.append((self.batches, loss.detach().float().clone(),
                               lr.detach().clone() if torch.is_tensor(lr) else lr))
            if steps % 50 == 0:  # the mean loss read back: a host sync, so not every step
                mean = read_back(loss_sum, logged, on_step) / steps
                self.check_finite(mean, steps, total)
                bar.set_postfix(loss=f"{mean:.4f}")
            progress.update(steps, tokens, (lambda: mean) if mean is not None else None)
        if steps % self.grad_accum:  # the epoch ended inside an accumulation group (eager only)
            self.update()
            self.count_update()
        seconds = time.perf_counter() - t0
        mean = read_back(loss_sum, logged, on_step) / max(steps, 1)  # the epoch's closing read
        self.check_finite(mean, steps, total)
        stats = {"train_loss": mean, "steps": steps, "seconds": seconds,
                 "tokens_per_s": tokens / seconds if seconds else 0.0,
                 "lr": float(self.optimizer.param_groups[0]["lr"]),
                 "surgery": {self.surgery.stat: conflicts} if self.surgery is not None else {}}
        if self.recorded_shapes() > shapes:
            r = self.recorded.recorded
            how = "recorded as CUDA graphs" if r.record else "prepared (run eagerly: no GPU)"
            memory = ""
            if self.device.type == "cuda":  # what the graphs' shared pool and the model hold at most
                memory = (f"; GPU memory peak {torch.cuda.max_memory_allocated(self.device) / 2 ** 20:.0f} MiB "
                          f"allocated, {torch.cuda.memory_reserved(self.device) / 2 ** 20:.0f} MiB reserved")
            main_print(f"{desc}: {len(r.entries) - shapes} new batch shapes {how}, {len(r.entries)} in "
                       f"all, {r.seconds:.1f}s spent warming up and recording{memory}")
            stats["recorded_shapes"], stats["recording_seconds"] = len(r.entries), r.seconds
        return stats

    def train_batch(self, batch, update, desc="train"):
        """One host batch trained on: its forward and backward passes, and with `update` the optimizer step
        after them. (its loss, what the gradient surgery did). The recorded step replays the whole step; a
        recording that fails falls back to the eager step, which then takes this batch and the rest."""
        if self.recorded is not None:
            try:
                return self.recorded(batch), 0
            except RecordingFailed as e:
                main_print(f"{desc}: {e}; the training step runs eagerly from here on")
                self.recorded = None
                self.step.zero_grad()  # whatever the failed recording's warm-up left
        loss, n = self.step.backward(to_device(batch, self.device))
        if update:
            self.update()
        return loss, n

    def update(self):
        """The eager step's update (clipping, optimizer, schedule, after-step), its gradients then dropped."""
        self.step.update()
        self.step.zero_grad()

    def count_update(self):
        """After every optimizer step, eager or recorded: the count, and the step hooks."""
        self.updates += 1
        for hook in self.step_hooks:
            hook(self.updates)

    def recorded_shapes(self):
        return len(self.recorded.recorded.entries) if self.recorded is not None else 0

    def check_finite(self, mean_loss, steps, total):
        """Stop at a training loss that is NaN or infinite: the weights are then no longer numbers,
        every later step would be wasted, and no epoch could be kept. Under fp16 the grad scaler
        skips the steps whose gradients overflow, so there a non-finite loss is not yet divergence
        (the dev score tells, in fit)."""
        if math.isfinite(mean_loss) or self.step.scaler.is_enabled():
            return
        # the schedule's base rate
        peak = max(float(g.get("initial_lr", g["lr"])) for g in self.optimizer.param_groups)
        raise Diverged(f"the training loss became {'NaN' if mean_loss != mean_loss else 'infinite'} by step "
                       f"{steps} of {total} (peak learning rate {peak:g}): the weights diverged, so training "
                       "stopped")  # (fit adds what the pipeline's flags can do about it)

    def state_dict(self):
        """Everything of the optimisation a resumed run needs: optimizer, schedule, fp16 grad scaler, and the
        generator PCGrad draws its task order from. The optimizer's and the schedule's state are saved in one
        form whichever step runs (eager or recorded), so that a run may resume with the other one."""
        return {"optimizer": portable_state(self.optimizer.state_dict()),
                "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
                "scaler": self.step.scaler.state_dict(), "generator": self.generator.get_state(),
                "batches": self.batches,
                "updates": self.updates,
                "gradvac": self.surgery.state_dict() if self.surgery is not None else None}

    def load_state_dict(self, state):
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        if state["scaler"]:
            self.step.scaler.load_state_dict(state["scaler"])
        self.generator.set_state(state["generator"])
        self.batches = state["batches"]
        # earlier checkpoints kept batches only
        self.updates = state.get("updates", self.batches // self.grad_accum)
        if self.surgery is not None:
            self.surgery.load_state_dict(state["gradvac"])
        if self.recorded is not None:  # new state tensors: the step is recorded anew, on them
            self.recorded = RecordedStep(self.step)


class Diverged(MinbertError):
    """The weights are no longer numbers (a NaN or infinite loss or dev score)."""


class _LossModule(torch.nn.Module):
    """model + loss function as one module, so DistributedDataParallel sees the whole step."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, loss_fn, batch):
        return loss_fn(self.model, batch)


def read_back(loss_sum, logged, on_step):
    """The epoch's loss sum so far as a number, and the batches' logged (count, loss, lr) handed to
    on_step: all read back from the device in one copy (one host sync). Empties `logged`."""
    counts, losses, lrs = zip(*logged) if logged else ((), (), ())
    device_lrs = tuple(lr.float() for lr in lrs if torch.is_tensor(lr))  # a host schedule's are numbers
    read = torch.stack((loss_sum,) + losses + device_lrs).tolist()
    read_lrs = iter(read[1 + len(counts):])
    for count, loss, lr in zip(counts, read[1:], lrs):
        on_step(count, loss, next(read_lrs) if torch.is_tensor(lr) else lr)
    logged.clear()
    return read[0]


SURGERIES = {"pcgrad": lambda tasks, recipe: PCGrad(),
             "gradvac": lambda tasks, recipe: GradVaccine(len(tasks), recipe.gradvac_beta)}


def build_trainer(model, loss_fn, recipe, runtime, steps_per_epoch, epochs=None, tasks=(), train_data=None,
                  rows=None, quiet=False):
    """The optimizer `recipe` (a specs.Recipe) names over `model`'s trainable parameters (grouped by
    layer-wise rate when recipe.llrd < 1), its schedule over all of the run's optimizer steps (`epochs`,
    default recipe.epochs, of `steps_per_epoch` batches), --freeze_layers and --gradual_unfreeze
    (finetuning/freezing.py), and the Trainer that steps them on runtime.device in runtime.amp, minimising
    `loss_fn` (an objectives.losses.TermLoss); with recipe.surgery it combines the gradients of `tasks`
    (Part 2). Where the step is recorded, the training batches of `train_data` (a datasets.TaskData, or dicts
    of them) take fixed shapes here, `rows` rows and a few widths: a graph replays one shape, so a few shapes
    mean a few graphs. `quiet`: no line on what trains (bench.py says it in its own rows)."""
    if runtime.record_step and train_data is not None:
        set_fixed_shapes(train_data, rows)
    unfreeze = setup_freezing(model.backbone, recipe.freeze_layers, recipe.gradual_unfreeze, main_print)
    # schedule.param_groups through its module, so that a tool may swap it (tools/layernorm_rate.py)
    groups = schedule.param_groups(model, recipe.lr, recipe.llrd, recipe.head_lr, recipe.weight_decay)
    if not quiet:
        describe_trainable(model, recipe.optimizer, frozen_parameters(model.backbone, recipe.freeze_layers))
    # --compile on a recorded step compiles AdamW's update too (optimizer._step_compiled); an eager step
    # already takes torch's one-pass fused kernel
    optimizer = make_optimizer(recipe.optimizer, groups, recipe.lr, recipe.weight_decay, recipe.foreach,
                               recipe.fused, compiled=runtime.compile and runtime.record_step)
    total = (epochs or recipe.epochs) * -(-steps_per_epoch // recipe.grad_accum)
    if runtime.record_step:  # the schedule on the device, so that a recorded step can apply it
        scheduler = schedule.DeviceSchedule(optimizer, recipe.scheduler, recipe.warmup_ratio, total,
                                            runtime.device)
    else:
        scheduler = schedule.make_scheduler(optimizer, recipe.scheduler, recipe.warmup_ratio, total)
    surgery = SURGERIES[recipe.surgery](tasks, recipe) if recipe.surgery else None
    return Trainer(model, loss_fn, optimizer, recipe, runtime, scheduler, surgery,
                   [unfreeze] if unfreeze is not None else [])


def optimizer_name(optimizer):
    """The --optimizer name of an optimizer (its class's name for one not in optimizer.OPTIMIZERS)."""
    return next((name for name, cls in OPTIMIZERS.items() if type(optimizer) is cls),
                type(optimizer).__name__)


def describe_trainable(model, optimizer="adamw", frozen=()):
    """Print (and return) how many parameters train and what the optimizer's state for them costs (AdamW and
    LAMB keep two tensors the size of each parameter, Lion one). `frozen`: parameters that never receive a
    gradient although they require one (--freeze_layers)."""
    params, frozen = list(model.parameters()), {id(p) for p in frozen}
    trainable = [p for p in params if p.requires_grad and id(p) not in frozen]
    n, total = sum(p.numel() for p in trainable), sum(p.numel() for p in params)
    state_bytes = STATE_TENSORS[optimizer] * sum(p.numel() * p.element_size() for p in trainable)
    name = OPTIMIZERS[optimizer].__name__
    main_print(f"trainable parameters: {n:,} of {total:,} ({100 * n / max(total, 1):.2f}%); "
               f"{name} state {state_bytes / 2**20:.1f} MiB")
    return {"trainable": n, "total": total, "optimizer_state_bytes": state_bytes}


