"""The word embeddings' gradient, written into one buffer that lives as long as the model.

BERT's word-embedding table is half of MiniLM's parameters (30,522 x 384), and a batch reads a few hundred of
its rows. torch's backward of a lookup allocates a zeroed gradient the size of the whole table every step and
adds the batch's rows into it: on the CPU that zeroing (and the fresh memory it touches) costs about as much
as the fused optimizer step. Here the gradient goes into a buffer allocated once: before a new gradient only
the rows the previous one wrote are zeroed, and the batch's rows are added. The optimizer still sees a dense
gradient (AdamW updates every row, as Algorithm 1 does), and the values are those of torch's backward (the
same sums, up to the order of additions for a token repeated in a batch). Two lookups before one optimizer
step (R-Drop's two passes, gradient accumulation) add into the same gradient, as autograd would.

On a GPU, zeroing the table is one fast kernel, while this path's bookkeeping (which rows to clear) cannot be
recorded in a CUDA graph: there torch's own backward runs. Four more cases take it, since they rely on
autograd's accumulation, which this path bypasses: torch.distributed (DistributedDataParallel reduces the
gradients autograd accumulates), torch.autograd.grad (PCGrad's and GradVac's per-task gradients:
training/trainer.py sets `reuse_grad` to False for them), torch.compile (--compile: the compiler writes the
lookup's backward into its own graph, which a side effect on this module would split), and a weight used
elsewhere too (the MLM head's tied decoder, tasks/mlm.py sets `reuse_grad` to False): autograd adds that use's
gradient into the buffer, on rows this module never zeroes again.
"""
import torch
import torch.nn as nn
import torch.nn.functional as F


class _Lookup(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weight, ids, table):
        ctx.table = table
        ctx.save_for_backward(ids)
        return F.embedding(ids, weight, table.padding_idx)

    @staticmethod
    def backward(ctx, grad):
        (ids,) = ctx.saved_tensors
        ctx.table.add_gradient(ids, grad)
        return None, None, None  # the gradient is in weight.grad already


class Embedding(nn.Embedding):
    """nn.Embedding whose weight gradient is written into a buffer kept between steps (see the module docstring)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.reuse_grad = True
        self._buffer, self._written = None, []

    def forward(self, ids):
        if not (self.reuse_grad and self.weight.requires_grad and torch.is_grad_enabled()) or self.sparse or \
                ids.device.type != "cpu" or torch.compiler.is_compiling() or \
                (torch.distributed.is_available() and torch.distributed.is_initialized()):
            return super().forward(ids)
        return _Lookup.apply(self.weight, ids, self)

    @torch.no_grad()
    def add_gradient(self, ids, grad):
        """Add a lookup's gradient to weight.grad: into the buffer when weight.grad is None (a new step: the
        rows the buffer's last gradient wrote are zeroed first), or into whatever weight.grad holds now."""
        w = self.weight
        rows, flat = ids.reshape(-1), grad.reshape(-1, w.shape[1]).to(w.dtype)
        if self.padding_idx is not None:  # the padding row gets no gradient, as in torch's backward
            flat = flat.masked_fill((rows == self.padding_idx)[:, None], 0.0)
        if w.grad is None:
            if self._buffer is None or self._buffer.shape != w.shape or self._buffer.device != w.device:
                self._buffer, self._written = torch.zeros_like(w), []
            elif self._written:
                # a row named twice is zeroed twice
                self._buffer.index_fill_(0, torch.cat(self._written), 0.0)
            self._written = []
            w.grad = self._buffer
        w.grad.index_add_(0, rows, flat)
        if w.grad is self._buffer:
            # a copy: the ids may be a static input that the next batch overwrites before these rows are zeroed
            self._written.append(rows.clone())
