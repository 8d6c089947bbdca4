"""The one training step every pipeline shares: autocast, fp16 loss scaling, gradient accumulation, gradient
clipping, a per-step learning-rate schedule, gradient surgery (PCGrad, GradVac) for steps that hold every
task, DistributedDataParallel, batches prefetched on a background thread (prefetch.py), a tqdm bar and
tokens/s, or the whole step recorded as CUDA graphs (graphs.py); and `build_trainer`, which makes the
optimizer, schedule and freezing a Recipe asks for. The epoch protocol around it (checkpoints, resuming,
early stopping, the log) is fit.py's."""
import math
import time

import torch
from tqdm.auto import tqdm

from minbert.embedding import Embedding
from minbert.finetuning.freezing import frozen_parameters, setup_freezing
from minbert.objectives.gradvac import GradVaccine
from minbert.objectives.pcgrad import PCGrad, task_gradients_backward
from minbert.precision import autocast, grad_scaler
from minbert.specs import Recipe, Runtime
from minbert.training import schedule
from minbert.training.graphs import CapturedTraining
from minbert.training.prefetch import prefetch
from optimizer import OPTIMIZERS, STATE_TENSORS, make_optimizer, portable_state
from utils import MinbertError, Progress, distributed, main_print, to_device


def count_tokens(batch):
    """Non-pad tokens in a batch (all its inputs; every part of a multi-task batch; not a fixed-shape batch's
    filler rows), counted on the host."""
    if "parts" in batch:
        return sum(count_tokens(b) for b in batch["parts"].values())
    real = batch["weight"] > 0 if "weight" in batch else slice(None)
    return sum(int(v["attention_mask"][real].sum()) for v in batch.values()
               if isinstance(v, dict) and "attention_mask" in v)


class Trainer:
    """One optimizer step path for every pipeline, built whole from its parts: the model, its optimizer
    and schedule, the recipe (gradient accumulation, clipping, the seed of PCGrad's task order) and the
    runtime (device, precision, eager or CUDA graphs: graphs.py), the gradient surgery of a step
    holding every task (objectives/pcgrad.PCGrad or objectives/gradvac.GradVaccine) and the hooks
    called after every optimizer step with the count of steps taken (--gradual_unfreeze).
    `build_trainer` makes all of them from a Recipe."""

    def __init__(self, model, optimizer, recipe=None, runtime=None, scheduler=None, surgery=None,
                 step_hooks=(), progress_every=60.0):
        """`recipe` and `runtime` default to specs.Recipe's and specs.Runtime's
        defaults (one plain CPU step)."""
        recipe, runtime = recipe or Recipe(lr=0.0), runtime or Runtime()
        self.model, self.optimizer, self.scheduler, self.surgery = model, optimizer, scheduler, surgery
        self.device, self.amp, self.graphs = runtime.device, runtime.amp, runtime.graphs
        self.grad_accum, self.max_grad_norm = recipe.grad_accum, recipe.max_grad_norm
        self.step_hooks = tuple(step_hooks)
        self.progress_every = progress_every  # seconds between plain progress lines when there is no terminal
        self.scaler = grad_scaler(self.device, self.amp)
        self.loss_module = _LossModule(model)
        self.world_size = distributed()[1]
        self.generator = torch.Generator().manual_seed(recipe.seed)  # PCGrad's task order, repeatable
        # training batches since the run started (saved with the state, so a resumed run goes on)
        self.batches = 0
        self.updates = 0  # optimizer steps taken (saved too); step_hooks are called with it after each one
        self.captured = None  # graphs.CapturedTraining, made at the first epoch (it needs the loss)
        # per-task gradients come from torch.autograd.grad, which needs autograd's accumulation
        if surgery is not None:
            for m in model.modules():
                if isinstance(m, Embedding):
                    m.reuse_grad = False
        if surgery is not None and self.world_size > 1:
            raise MinbertError(f"--{surgery.flag} under DDP is not supported: per-task gradients would each "
                               "need their own all-reduce; run it in one process")
        if self.graphs:  # what the recorded step cannot do (flags/defaults.py eager_reasons keeps runs out)
            cannot = [why for bad, why in (
                (self.step_hooks, "a step hook (--gradual_unfreeze), which changes what trains"),
                (self.grad_accum > 1, "--grad_accum"), (self.amp == "fp16", "fp16"),
                (surgery is not None, "gradient surgery"), (self.world_size > 1, "several processes")) if bad]
            if cannot:
                raise MinbertError(f"the training step recorded as CUDA graphs cannot take {cannot[0]}: "
                                   f"run it with --no_cuda_graphs")
        if self.world_size > 1:
            from torch.nn.parallel import DistributedDataParallel as DDP
            # DDP syncs gradients for whatever runs through its forward, so the loss itself goes through
            # it; a multitask step leaves the other heads unused, hence find_unused_parameters.
            self.loss_module = DDP(self.loss_module,
                                   device_ids=[self.device.index] if self.device.type == "cuda"
                                   else None, find_unused_parameters=True)

    @property
    def params(self):
        """The parameters that train now (--gradual_unfreeze changes them between epochs)."""
        return [p for p in self.model.parameters() if p.requires_grad]

    def run_epoch(self, batches, loss_fn, total, desc="train", on_step=None, log_every=20):
        """One pass over `batches` (batch dicts on the host); returns its statistics. `loss_fn` (an
        objectives.losses.TermLoss) gives a batch's loss, or {task: loss} for a batch holding every task
        (summed, or combined by the gradient surgery); its after_step follows every optimizer step.
        `on_step(batches, loss, lr)` is called every `log_every` batches (TensorBoard)."""
        self.model.train()
        for hook in self.step_hooks:  # e.g. gradual unfreezing, at the step count this epoch starts from
            hook(self.updates)
        if self.graphs and self.captured is None:
            self.captured = CapturedTraining(self.model, self.loss_module, loss_fn, self.optimizer,
                                             self.scheduler, self.device, self.amp, self.max_grad_norm)
        if self.captured is None:  # the captured step keeps its gradient buffers
            self.optimizer.zero_grad(set_to_none=True)
        recorded = len(self.captured.graphs.entries) if self.captured else 0
        loss_sum = torch.zeros((), device=self.device)
        tokens, steps, conflicts, t0 = 0, 0, 0, time.perf_counter()
        bar = tqdm(prefetch(batches, self.device), total=total, desc=desc, disable=None, leave=False)
        progress = Progress(desc, total, self.progress_every, terminal=not bar.disable)
        for batch in bar:
            tokens += count_tokens(batch)
            if self.captured is not None:  # forward, backward and the optimizer step, replayed
                loss = self.captured(batch)
                self.updates += 1
            else:
                loss, n = self.backward(to_device(batch, self.device), loss_fn)
                conflicts += n
                if (steps + 1) % self.grad_accum == 0:
                    self.step(loss_fn)
            loss_sum += loss.detach().float()
            steps += 1
            self.batches += 1
            if steps % 50 == 0:  # the mean loss read back: a host sync, so not every step
                mean = loss_sum.item() / steps
                self.check_finite(mean, steps, total)
                bar.set_postfix(loss=f"{mean:.4f}")
            if on_step is not None and self.batches % log_every == 0:
                on_step(self.batches, loss.detach().float().item(),
                        float(self.optimizer.param_groups[0]["lr"]))
            progress.update(steps, tokens, lambda: loss_sum.item() / steps)
        if self.captured is None and steps % self.grad_accum:  # the epoch ended inside an accumulation group
            self.step(loss_fn)
        seconds = time.perf_counter() - t0
        mean = loss_sum.item() / max(steps, 1)  # the epoch's one closing read of the loss
        self.check_finite(mean, steps, total)
        stats = {"train_loss": mean, "steps": steps, "seconds": seconds,
                 "tokens_per_s": tokens / seconds if seconds else 0.0,
                 "lr": float(self.optimizer.param_groups[0]["lr"]),
                 "surgery": {self.surgery.stat: conflicts} if self.surgery is not None else {}}
        if self.captured is not None and len(self.captured.graphs.entries) > recorded:
            g = self.captured.graphs
            how = "recorded as CUDA graphs" if g.record else "prepared (run eagerly: no GPU)"
            main_print(f"{desc}: {len(g.entries) - recorded} new batch shapes {how}, {len(g.entries)} in "
                       f"all, {g.seconds:.1f}s spent warming up and recording")
            stats["graphs"], stats["graph_seconds"] = len(g.entries), g.seconds
        return stats

    def backward(self, batch, loss_fn):
        """The eager step's forward and backward passes on a batch on the device: (its loss,
        what the gradient surgery did)."""
        with autocast(self.device, self.amp):
            loss = self.loss_module(loss_fn, batch)
        # every task's batch in this step: gradient surgery
        if isinstance(loss, dict) and self.surgery is not None:
            n = task_gradients_backward([l / self.grad_accum for l in loss.values()], self.params,
                                        lambda grads: self.surgery.combine(grads, self.generator),
                                        self.scaler)
            return sum(loss.values()), n
        if isinstance(loss, dict):  # every task's batch, losses summed (one process only: weight 1)
            loss, weight = sum(loss.values()), 1.0
        elif self.world_size == 1:
            weight = 1.0
        else:
            # A rank holds `local` of the global batch's examples; DDP averages over ranks, so this weight
            # makes the result the global batch's mean even when the last batch splits unevenly.
            weight = 0.0 if batch.get("ghost") else (
                len(batch["index"]) * self.world_size / batch.get("global_size", len(batch["index"])))
        self.scaler.scale(loss * (weight / self.grad_accum)).backward()
        return loss, 0

    def check_finite(self, mean_loss, steps, total):
        """Stop at a training loss that is NaN or infinite: the weights are then no longer numbers,
        every later step would be wasted, and no epoch could be kept. Under fp16 the grad scaler
        skips the steps whose gradients overflow, so there a non-finite loss is not yet divergence
        (the dev score tells, in fit)."""
        if math.isfinite(mean_loss) or self.scaler.is_enabled():
            return
        # the schedule's base rate
        peak = max(float(g.get("initial_lr", g["lr"])) for g in self.optimizer.param_groups)
        raise Diverged(f"the training loss became {'NaN' if mean_loss != mean_loss else 'infinite'} by step "
                       f"{steps} of {total} (peak learning rate {peak:g}): the weights diverged, so training "
                       "stopped; lower --lr, or add --max_grad_norm 1.0")

    def state_dict(self):
        """Everything of the optimisation a resumed run needs: optimizer, schedule, fp16 grad scaler, and the
        generator PCGrad draws its task order from. The optimizer's and the schedule's state are saved in one
        form whichever step runs (eager or graphs), so that a run may resume with the other one."""
        return {"optimizer": portable_state(self.optimizer.state_dict()),
                "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
                "scaler": self.scaler.state_dict(), "generator": self.generator.get_state(),
                "batches": self.batches,
                "updates": self.updates,
                "gradvac": self.surgery.state_dict() if self.surgery is not None else None}

    def load_state_dict(self, state):
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        if state["scaler"]:
            self.scaler.load_state_dict(state["scaler"])
        self.generator.set_state(state["generator"])
        self.batches = state["batches"]
        # earlier checkpoints kept batches only
        self.updates = state.get("updates", self.batches // self.grad_accum)
        if self.surgery is not None:
            self.surgery.load_state_dict(state["gradvac"])

    def step(self, loss_fn):
        """The eager optimizer step, then the schedule's, the step hooks and the loss's after_step."""
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
        loss_fn.after_step()


class Diverged(MinbertError):
    """The weights are no longer numbers (a NaN or infinite loss or dev score)."""


class _LossModule(torch.nn.Module):
    """model + loss function as one module, so DistributedDataParallel sees the whole step."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, loss_fn, batch):
        return loss_fn(self.model, batch)


SURGERIES = {"pcgrad": lambda tasks, recipe: PCGrad(),
             "gradvac": lambda tasks, recipe: GradVaccine(len(tasks), recipe.gradvac_beta)}


def build_trainer(model, recipe, runtime, steps_per_epoch, epochs=None, tasks=()):
    """The optimizer `recipe` (a specs.Recipe) names over `model`'s trainable parameters (grouped by
    layer-wise rate when recipe.llrd < 1), its schedule over all of the run's optimizer steps (`epochs`,
    default recipe.epochs, of `steps_per_epoch` batches), --freeze_layers and --gradual_unfreeze
    (finetuning/freezing.py), and the Trainer that steps them on runtime.device in runtime.amp; with
    recipe.surgery it combines the gradients of `tasks` (Part 2)."""
    unfreeze = setup_freezing(model.backbone, recipe.freeze_layers, recipe.gradual_unfreeze, main_print)
    # schedule.param_groups through its module, so that a tool may swap it (tools/layernorm_rate.py)
    groups = schedule.param_groups(model, recipe.lr, recipe.llrd, recipe.head_lr, recipe.weight_decay)
    describe_trainable(model, recipe.optimizer, frozen_parameters(model.backbone, recipe.freeze_layers))
    optimizer = make_optimizer(recipe.optimizer, groups, recipe.lr, recipe.weight_decay, recipe.foreach,
                               recipe.fused)
    total = (epochs or recipe.epochs) * -(-steps_per_epoch // recipe.grad_accum)
    if runtime.graphs:  # the schedule on the device, so that a recorded step can apply it
        scheduler = schedule.DeviceSchedule(optimizer, recipe.scheduler, recipe.warmup_ratio, total,
                                            runtime.device)
    else:
        scheduler = schedule.make_scheduler(optimizer, recipe.scheduler, recipe.warmup_ratio, total)
    surgery = SURGERIES[recipe.surgery](tasks, recipe) if recipe.surgery else None
    return Trainer(model, optimizer, recipe, runtime, scheduler, surgery,
                   [unfreeze] if unfreeze is not None else [])


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


