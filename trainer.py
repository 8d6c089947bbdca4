"""The one training loop both pipelines share: autocast, fp16 loss scaling, gradient accumulation,
gradient clipping, a per-step learning-rate schedule, PCGrad for steps that hold every task,
DistributedDataParallel, batches prefetched on a background thread, a tqdm bar and tokens/s; and the
early-stopping rule both pipelines apply to their dev score."""
import math
import time

import torch
from tqdm.auto import tqdm

from pcgrad import pcgrad_backward
from precision import autocast, grad_scaler
from utils import MinbertError, distributed, main_print, to_device


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
                 pcgrad=False, seed=0):
        self.model, self.optimizer, self.device, self.amp = model, optimizer, device, amp
        self.grad_accum, self.scheduler, self.max_grad_norm, self.pcgrad = grad_accum, scheduler, max_grad_norm, pcgrad
        self.scaler = grad_scaler(device, amp)
        self.loss_module = _LossModule(model)
        self.world_size = distributed()[1]
        self.generator = torch.Generator().manual_seed(seed)  # PCGrad's task order, repeatable
        if pcgrad and self.world_size > 1:
            raise MinbertError("--pcgrad under DDP is not supported: per-task gradients would each need their "
                               "own all-reduce; run PCGrad in one process")
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
        self.conflicts = 0
        loss_sum = torch.zeros((), device=self.device)
        tokens, steps, t0 = 0, 0, time.perf_counter()
        bar = tqdm(prefetch(batches, self.device), total=total, desc=desc, disable=None, leave=False)
        for i, batch in enumerate(bar):
            tokens += count_tokens(batch)
            batch = to_device(batch, self.device)
            with autocast(self.device, self.amp):
                loss = self.loss_module(loss_fn, batch)
            if isinstance(loss, dict) and self.pcgrad:  # every task's batch in this step: gradient surgery
                self.conflicts += pcgrad_backward([l / self.grad_accum for l in loss.values()], self.params,
                                                  self.scaler, self.generator)
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
                bar.set_postfix(loss=f"{loss_sum.item() / steps:.4f}")
        if steps and pending:  # the epoch ended inside an accumulation group
            self.step()
        seconds = time.perf_counter() - t0
        stats = {"train_loss": loss_sum.item() / max(steps, 1), "steps": steps, "seconds": seconds,
                 "tokens_per_s": tokens / seconds if seconds else 0.0,
                 "lr": self.optimizer.param_groups[0]["lr"]}
        if self.pcgrad:
            stats["pcgrad_conflicts"] = self.conflicts
        return stats

    def step(self):
        if self.max_grad_norm:
            self.scaler.unscale_(self.optimizer)  # clip the true gradients, not the fp16-scaled ones
            torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm)
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)
        if self.scheduler is not None:
            self.scheduler.step()


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


class _LossModule(torch.nn.Module):
    """model + loss function as one module, so DistributedDataParallel sees the whole step."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, loss_fn, batch):
        return loss_fn(self.model, batch)


def build_trainer(model, args, device, steps_per_epoch, pcgrad=False):
    """AdamW over `model`'s trainable parameters (grouped by layer-wise rate when --llrd < 1), the
    --scheduler over all of the run's optimizer steps, and the Trainer that steps them."""
    from optimizer import AdamW
    from schedule import make_scheduler, param_groups
    groups = param_groups(model, args.lr, args.llrd, args.head_lr, args.weight_decay)
    describe_trainable(model)
    optimizer = AdamW(groups, lr=args.lr, weight_decay=args.weight_decay, foreach=args.foreach)
    total = args.epochs * -(-steps_per_epoch // args.grad_accum)
    scheduler = make_scheduler(optimizer, args.scheduler, args.warmup_ratio, total)
    return Trainer(model, optimizer, device, args.amp, args.grad_accum, scheduler=scheduler,
                   max_grad_norm=args.max_grad_norm, pcgrad=pcgrad, seed=args.seed)


def describe_trainable(model):
    """Print (and return) how many parameters train and what AdamW's state for them costs: exp_avg and
    exp_avg_sq, each the size of its parameter."""
    params = list(model.parameters())
    trainable = [p for p in params if p.requires_grad]
    n, total = sum(p.numel() for p in trainable), sum(p.numel() for p in params)
    state_bytes = 2 * sum(p.numel() * p.element_size() for p in trainable)
    main_print(f"trainable parameters: {n:,} of {total:,} ({100 * n / max(total, 1):.2f}%); "
                        f"AdamW state {state_bytes / 2**20:.1f} MiB")
    return {"trainable": n, "total": total, "optimizer_state_bytes": state_bytes}


def stop_signal(stop):
    """Rank 0's early-stopping decision, the same on every rank (a broadcast under DDP)."""
    rank, world = distributed()
    if world == 1:
        return stop
    flag = torch.tensor([int(stop)])
    torch.distributed.broadcast(flag, src=0)
    return bool(flag.item())
