"""objectives/pcgrad.py: conflicting task gradients projected as the paper says, the others left as they are."""
import torch

from minbert.objectives.pcgrad import project_conflicting


def test_pcgrad_projects_conflicting_gradients_as_the_paper_says():
    g1, g2 = torch.tensor([1.0, 0.0]), torch.tensor([-1.0, 1.0])  # g1 . g2 = -1: a conflict
    out = project_conflicting([g1, g2], torch.Generator().manual_seed(0))
    p1 = g1 - (g1 @ g2) / (g2 @ g2) * g2  # [0.5, 0.5]
    p2 = g2 - (g2 @ g1) / (g1 @ g1) * g1  # [0, 1]
    torch.testing.assert_close(out, p1 + p2)
    torch.testing.assert_close(p1 @ g2, torch.tensor(0.0))  # on the normal plane of the other gradient


def test_pcgrad_leaves_non_conflicting_gradients_unchanged():
    g = [torch.tensor([1.0, 2.0, 0.0]), torch.tensor([0.5, 0.0, 1.0]), torch.tensor([0.0, 1.0, 1.0])]
    torch.testing.assert_close(project_conflicting(g), g[0] + g[1] + g[2])
