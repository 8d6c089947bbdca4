"""The one training loop both pipelines share: autocast, fp16 loss scaling, gradient accumulation,
DistributedDataParallel, batches prefetched on a background thread, a tqdm bar and tokens/s."""
import time

import torch
from tqdm.auto import tqdm

from precision import autocast, grad_scaler
from utils import distributed, to_device


def count_tokens(batch):
    """Non-pad tokens in a batch (all its inputs), counted on the host before it moves."""
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

    def __init__(self, model, optimizer, device, amp="none", grad_accum=1):
        self.model, self.optimizer, self.device, self.amp = model, optimizer, device, amp
        self.grad_accum = grad_accum
        self.scaler = grad_scaler(device, amp)
        self.loss_module = _LossModule(model)
        self.world_size = distributed()[1]
        if self.world_size > 1:
            from torch.nn.parallel import DistributedDataParallel as DDP
            # DDP syncs gradients for whatever runs through its forward, so the loss itself goes through
            # it; a multitask step leaves the other heads unused, hence find_unused_parameters.
            self.loss_module = DDP(self.loss_module, device_ids=[device.index] if device.type == "cuda" else None,
                                   find_unused_parameters=True)

    def run_epoch(self, batches, loss_fn, total, desc="train"):
        """`loss_fn(model, batch)` returns a scalar loss; `batches` yields batch dicts (on the host)."""
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum = torch.zeros((), device=self.device)
        tokens, steps, t0 = 0, 0, time.perf_counter()
        bar = tqdm(prefetch(batches, self.device), total=total, desc=desc, disable=None, leave=False)
        for i, batch in enumerate(bar):
            tokens += count_tokens(batch)
            batch = to_device(batch, self.device)
            with autocast(self.device, self.amp):
                loss = self.loss_module(loss_fn, batch)
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
        return {"train_loss": loss_sum.item() / max(steps, 1), "steps": steps, "seconds": seconds,
                "tokens_per_s": tokens / seconds if seconds else 0.0}

    def step(self):
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.optimizer.zero_grad(set_to_none=True)


class _LossModule(torch.nn.Module):
    """model + loss function as one module, so DistributedDataParallel sees the whole step."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, loss_fn, batch):
        return loss_fn(self.model, batch)
