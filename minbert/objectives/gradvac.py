"""Gradient Vaccine (GradVac; Wang, Tsvetkov, Firat and Cao 2021, "Gradient Vaccine:
Investigating and Improving Multi-task Optimization in Massively Multilingual Models", section
3.2, equations 2 and 3), Part 2's --gradvac.

PCGrad (pcgrad.py) acts only when two task gradients point against each other, and then makes them orthogonal.
GradVac sets a target instead: for every ordered pair of tasks (i, j) it keeps an exponential moving average
of the cosine similarity their gradients have had,

    phi_hat_ij <- (1 - beta) phi_hat_ij + beta phi_ij,        beta = 1e-2 (the paper's),

and in a step whose similarity phi_ij = cos(g_i, g_j) falls below it, moves g_i towards g_j just far enough
that the cosine becomes phi_hat_ij:

    g_i <- g_i + ||g_i|| (phi_hat_ij sqrt(1 - phi_ij^2) - phi_ij sqrt(1 - phi_hat_ij^2))
                 / (||g_j|| sqrt(1 - phi_hat_ij^2)) * g_j .

With phi_hat = 0 this is PCGrad's projection, applied to negative similarities only; as the averages
learn the similarity the tasks usually have, GradVac also corrects steps that are less aligned than
usual. As in PCGrad the other tasks are visited in a random order and g_j is task j's original gradient;
the update is the sum of the adjusted gradients. The whole model's gradient is one vector here (the paper
also tries per-layer vectors).
"""
import math

import torch


class GradVaccine:
    """The averages phi_hat of every ordered task pair (saved with a resumable checkpoint) and the combination."""
    # the flag, and the per-epoch log field counting what it did
    flag, stat = "gradvac", "gradvac_adjustments"

    def __init__(self, num_tasks, beta=1e-2):
        if not 0 < beta <= 1:
            raise ValueError(f"GradVac's beta must be in (0, 1], got {beta}")
        self.beta = beta
        self.ema = torch.zeros(num_tasks, num_tasks, dtype=torch.float64)

    def combine(self, grads, generator=None):
        """grads: one flat gradient per task. Returns (the sum of the adjusted gradients, how many adjustments)."""
        adjusted, n = [], 0
        norms = [g.norm() for g in grads]
        for i, g in enumerate(grads):
            g = g.clone()
            others = [j for j in range(len(grads)) if j != i]
            for k in torch.randperm(len(others), generator=generator).tolist():
                j = others[k]
                gi_norm, gj_norm = g.norm(), norms[j]
                if gi_norm == 0 or gj_norm == 0:
                    continue
                phi = float(torch.dot(g, grads[j]) / (gi_norm * gj_norm))
                phi = max(-1.0, min(1.0, phi))
                target = float(self.ema[i, j])
                if phi < target:
                    coef = gi_norm * (target * math.sqrt(1 - phi ** 2) - phi * math.sqrt(1 - target ** 2)) / (
                        gj_norm * math.sqrt(max(1 - target ** 2, 1e-12)))
                    g = g + coef * grads[j]
                    n += 1
                self.ema[i, j] = (1 - self.beta) * target + self.beta * phi
            adjusted.append(g)
        return torch.stack(adjusted).sum(0), n

    def state_dict(self):
        return {"beta": self.beta, "ema": self.ema.clone()}

    def load_state_dict(self, state):
        self.beta, self.ema = state["beta"], state["ema"].clone()
