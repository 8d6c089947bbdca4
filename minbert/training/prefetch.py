"""The next training batches built on a background thread while the model works on this one (and pinned on
a GPU, so that the copy to the device overlaps compute)."""
import queue
import threading

import torch


def prefetch(batches, device, depth=3):
    """Build the next batches on a background thread while the model works on this one (and pin them,
    so a GPU copy can overlap compute). Order is unchanged, so runs stay repeatable."""
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
