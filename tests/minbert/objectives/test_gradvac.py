"""gradvac.py: GradVac moves a task gradient to exactly the target similarity when a step falls below it, equals
PCGrad's projection while the target is 0, keeps the moving average of equation 2, and runs in Part 2."""
import json
import math

import pytest
import torch

import multitask_classifier as mt
from minbert.objectives.gradvac import GradVaccine
from minbert.objectives.pcgrad import project_conflicting
from tests.course import part2_args


def _cos(a, b):
    return float(torch.dot(a, b) / (a.norm() * b.norm()))


def test_with_a_target_of_zero_it_is_pcgrads_projection():
    g = [torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([-1.0, 1.0], dtype=torch.float64)]
    combined, n = GradVaccine(2).combine(g, torch.Generator().manual_seed(0))
    torch.testing.assert_close(combined, project_conflicting(g, torch.Generator().manual_seed(0)))
    assert n == 2  # both directions of the one conflicting pair


def test_a_step_below_the_target_is_moved_exactly_onto_it_and_the_average_follows():
    gv = GradVaccine(2, beta=0.25)
    gv.ema[0, 1] = gv.ema[1, 0] = 0.5
    g1, g2 = torch.tensor([1.0, 0.2, 0.0], dtype=torch.float64), torch.tensor([0.1, 1.0, 0.3], dtype=torch.float64)
    phi = _cos(g1, g2)
    assert phi < 0.5
    combined, n = gv.combine([g1, g2], torch.Generator().manual_seed(0))
    assert n == 2
    # equation 3 by hand for g1 (g2's adjustment is the mirror image)
    coef1 = g1.norm() * (0.5 * math.sqrt(1 - phi ** 2) - phi * math.sqrt(1 - 0.25)) / (g2.norm() * math.sqrt(1 - 0.25))
    coef2 = g2.norm() * (0.5 * math.sqrt(1 - phi ** 2) - phi * math.sqrt(1 - 0.25)) / (g1.norm() * math.sqrt(1 - 0.25))
    g1_new, g2_new = g1 + coef1 * g2, g2 + coef2 * g1
    assert _cos(g1_new, g2) == pytest.approx(0.5) and _cos(g2_new, g1) == pytest.approx(0.5)
    torch.testing.assert_close(combined, g1_new + g2_new)
    # equation 2: phi_hat <- (1 - beta) phi_hat + beta phi, with the step's own similarity
    assert float(gv.ema[0, 1]) == pytest.approx(0.75 * 0.5 + 0.25 * phi)


def test_a_step_at_or_above_the_target_is_left_alone():
    gv = GradVaccine(2)
    g = [torch.tensor([1.0, 0.1]), torch.tensor([1.0, 0.0])]
    combined, n = gv.combine(g)
    assert n == 0 and torch.equal(combined, g[0] + g[1])
    assert float(gv.ema[0, 1]) == pytest.approx(0.01 * _cos(g[0], g[1]))


def test_gradvac_in_part2_logs_its_adjustments(tmp_path, course_data, tiny_model):
    mt.main(part2_args(tmp_path, course_data, tiny_model, "--epochs", "2", "--steps_per_epoch", "6", "--sampler", "all",
                       "--gradvac"))
    log = [json.loads(l) for l in (tmp_path / "ck" / "mt-log.jsonl").read_text().splitlines()]
    assert all("gradvac_adjustments" in r and "pcgrad_conflicts" not in r for r in log)
    ema = torch.load(tmp_path / "ck" / "mt-last.pt", weights_only=True)["trainer"]["gradvac"]["ema"]
    assert ema.shape == (3, 3) and bool((ema != 0).any())  # the averages learned something, and are saved
