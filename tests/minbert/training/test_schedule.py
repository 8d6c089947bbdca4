"""training/schedule.py: the schedules' values at known steps, per optimizer step; layer-wise rates; the device
schedule equals the host one and resumes where it stopped."""
import math

import pytest
import torch

import classifier
from minbert.specs import ModelSpec
from minbert.training.schedule import layer_depths, lr_factor, make_scheduler, param_groups
from optimizer import AdamW


def test_schedule_values_at_known_steps():
    # 100 steps, 10 of warm-up
    assert lr_factor(0, "linear", 10, 100) == pytest.approx(0.1)
    assert lr_factor(9, "linear", 10, 100) == pytest.approx(1.0)
    assert lr_factor(10, "linear", 10, 100) == pytest.approx(1.0)
    assert lr_factor(55, "linear", 10, 100) == pytest.approx(0.5)
    assert lr_factor(100, "linear", 10, 100) == pytest.approx(0.0)
    assert lr_factor(55, "cosine", 10, 100) == pytest.approx(0.5)
    assert lr_factor(10 + 90 // 3, "cosine", 10, 100) == pytest.approx(0.5 * (1 + math.cos(math.pi / 3)))
    assert lr_factor(4, "constant", 10, 100) == pytest.approx(0.5)
    assert lr_factor(99, "constant", 10, 100) == 1.0
    assert lr_factor(0, "constant", 0, 100) == 1.0  # the handout's plain constant rate


def test_lambda_lr_on_our_adamw_steps_per_optimizer_step():
    p = torch.nn.Parameter(torch.zeros(3))
    opt = AdamW([p], lr=2e-3)
    sched = make_scheduler(opt, "linear", 0.25, 8)  # 2 warm-up steps
    seen = []
    for _ in range(8):
        seen.append(opt.param_groups[0]["lr"])
        p.grad = torch.ones(3)
        opt.step()
        sched.step()
    assert seen == pytest.approx([1e-3, 2e-3, 2e-3, 2e-3 * 5 / 6, 2e-3 * 4 / 6, 2e-3 * 3 / 6, 2e-3 * 2 / 6, 2e-3 / 6])


def test_llrd_groups(tiny_model):
    model = classifier.BertSentimentClassifier(ModelSpec(pretrained=str(tiny_model), dropout=[0.0]))  # 2 layers
    depth = layer_depths(model.backbone)
    assert depth[id(model.bert.bert_layers[1].interm_dense.weight)] == 0
    assert depth[id(model.bert.bert_layers[0].interm_dense.weight)] == 1
    assert depth[id(model.bert.word_embedding.weight)] == 2
    assert id(model.classifier.weight) not in depth  # a head, at the top (its own rate)
    groups = param_groups(model, 1e-3, llrd=0.5, head_lr=5e-3)
    rate = {id(p): g["lr"] for g in groups for p in g["params"]}
    assert rate[id(model.classifier.weight)] == 5e-3
    assert rate[id(model.bert.bert_layers[1].out_dense.weight)] == pytest.approx(1e-3)
    assert rate[id(model.bert.bert_layers[0].out_dense.weight)] == pytest.approx(5e-4)
    assert rate[id(model.bert.word_embedding.weight)] == pytest.approx(2.5e-4)
    assert rate[id(model.bert.pooler_dense.weight)] == pytest.approx(1e-3)
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    assert len(param_groups(model, 1e-3)) == 1  # llrd 1.0: one group, as before


@pytest.mark.parametrize("kind", ["constant", "linear", "cosine"])
def test_the_device_schedule_is_the_host_schedule(kind):
    from minbert.training.schedule import lr_factor, lr_factor_tensor
    got = [float(lr_factor_tensor(torch.tensor(s), kind, 3, 12)) for s in range(15)]
    assert got == pytest.approx([lr_factor(s, kind, 3, 12) for s in range(15)], rel=1e-6)


def test_a_device_schedule_resumes_where_it_stopped():
    from minbert.training.schedule import DeviceSchedule
    p = torch.nn.Parameter(torch.zeros(2))
    first = DeviceSchedule(AdamW([p], lr=1.0, capturable=True), "cosine", 0.1, 20, torch.device("cpu"))
    for _ in range(7):
        first.step()
    again = DeviceSchedule(AdamW([p], lr=1.0, capturable=True), "cosine", 0.1, 20, torch.device("cpu"))
    again.load_state_dict(first.state_dict())
    assert float(again.optimizer.param_groups[0]["lr"]) == float(first.optimizer.param_groups[0]["lr"]) < 1.0
