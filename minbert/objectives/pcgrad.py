"""Gradient surgery for multi-task learning (PCGrad; Yu et al. 2020, "Gradient Surgery for Multi-Task
Learning", Algorithm 1; handout equation 14).

For every task i, in a random order of the other tasks j: if g_i conflicts with g_j (g_i . g_j < 0),
project g_i onto the normal plane of g_j,

    g_i <- g_i - (g_i . g_j) / ||g_j||^2 * g_j ,

where g_j is task j's original gradient. The update is the sum of the projected gradients. Gradients
that do not conflict are left as they are, so with no conflict PCGrad is plain summed multi-task SGD.
"""
import torch


def project_conflicting(grads, generator=None):
    """grads: a list of flat gradient tensors, one per task. Returns the sum of their PCGrad projections."""
    projected = []
    for i, g in enumerate(grads):
        g = g.clone()
        others = [j for j in range(len(grads)) if j != i]
        order = torch.randperm(len(others), generator=generator).tolist()
        for k in order:
            gj = grads[others[k]]
            dot = torch.dot(g, gj)
            if dot < 0:
                g -= dot / gj.pow(2).sum().clamp_min(1e-20) * gj
        projected.append(g)
    return torch.stack(projected).sum(0)


def pcgrad_combine(grads, generator=None):
    """(PCGrad's combined gradient, the number of conflicting task pairs): the Trainer's `combine` for --pcgrad."""
    conflicts = sum(int(torch.dot(grads[i], grads[j]) < 0)
                    for i in range(len(grads)) for j in range(i + 1, len(grads)))
    return project_conflicting(grads, generator), conflicts


class PCGrad:
    """--pcgrad as the Trainer's gradient surgery (training/trainer.py); it keeps no state of its own (the
    task order's generator is the Trainer's, saved with it)."""
    flag, stat = "pcgrad", "pcgrad_conflicts"  # the flag, and the per-epoch log field counting what it did

    def combine(self, grads, generator=None):
        return pcgrad_combine(grads, generator)

    def state_dict(self):
        return None

    def load_state_dict(self, state):
        pass


def task_gradients_backward(losses, params, combine, scaler=None):
    """Backpropagate each task's loss separately, combine the flat per-task gradients with
    `combine(grads) -> (gradient, count)` (PCGrad's, or gradvac.GradVaccine.combine), and add the result to
    `params`' .grad (so gradient accumulation still works). Returns the count `combine` gives."""
    flat = []
    for loss in losses:
        loss = scaler.scale(loss) if scaler is not None else loss
        gs = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
        flat.append(torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1).float()
                               for g, p in zip(gs, params)]))
    combined, count = combine(flat)
    offset = 0
    for p in params:
        n = p.numel()
        g = combined[offset:offset + n].view_as(p).to(p.dtype)
        p.grad = g.clone() if p.grad is None else p.grad + g
        offset += n
    return count
