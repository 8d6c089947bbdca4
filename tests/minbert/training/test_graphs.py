"""training/graphs.py: the whole training step recorded once per batch shape. On the CPU its stand-in runs the same
path eagerly (static buffers, gradients zeroed inside the step, each shape's own parameters, the capturable AdamW and
the device schedule): it must train as the eager step does. On a GPU the recorded graphs must too, resume exactly,
and read nothing back to the host."""
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from datasets import set_fixed_shapes, task_dataset
from minbert.course_data import MULTITASK, data_file, read_examples
from minbert.objectives.losses import ClassificationLoss, MultitaskLoss
from minbert.objectives.rdrop import RDrop
from minbert.specs import Recipe, Regularizers, Runtime, TaskLosses
from minbert.tasks.multitask import MultitaskBERT
from minbert.training import trainer as trainer_module
from minbert.training.trainer import build_trainer
from tests.checkpoints import multitask_spec, sentiment_model
from tests.processes import DEVICES
from tokenizer import BertTokenizer
from utils import to_device

RECIPE = Recipe(lr=3e-3, epochs=2, scheduler="linear", warmup_ratio=0.2, max_grad_norm=1.0, weight_decay=0.01)


def sst_batches(course_data, tiny_model, rows=8, seed=0):
    """Part 1 training batches of the tiny course data with fixed shapes: 48 examples, so the last of 7 is short."""
    data = task_dataset(read_examples(data_file(course_data, "sst", "train"), "sst", "train"), "sst",
                        BertTokenizer.from_pretrained(str(tiny_model)), 64)
    set_fixed_shapes(data, rows)
    return list(data.batches(rows, shuffle=True, seed=seed))


def part2_batches(course_data, tiny_model, rows=8, quora="cross"):
    """Part 2 batches of the three tasks, taken in turn (a task's step leaves the other heads without gradient);
    STS siamese, Quora `quora`-encoded."""
    tok = BertTokenizer.from_pretrained(str(tiny_model))
    streams = {}
    for task in MULTITASK:
        d = task_dataset(read_examples(data_file(course_data, task, "train"), task, "train"), task, tok, 64,
                         "siamese" if task == "sts" else quora)
        set_fixed_shapes(d, rows)
        streams[task] = [{**b, "task": task} for b in d.batches(rows, shuffle=True, seed=1)]
    return [b for group in zip(*streams.values()) for b in group]


def train(model, loss, batches, graphs, device, epochs=2, planned=None, recipe=RECIPE):
    """Train `model` over `batches` for `epochs` epochs of a schedule over `planned` (default `epochs`) on the eager
    or the captured path; returns (per-step losses, the trainer)."""
    model.to(device)
    t = build_trainer(model, recipe, Runtime(device=torch.device(device), graphs=graphs), len(batches),
                      planned or epochs)
    losses = []
    for _ in range(epochs):
        t.run_epoch(iter(batches), loss, len(batches), on_step=lambda step, value, lr: losses.append(value),
                    log_every=1)
    return losses, t


def params(model):
    return {k: v.detach().cpu().clone() for k, v in model.named_parameters()}


@pytest.mark.parametrize("device", DEVICES)
def test_the_captured_part1_step_trains_as_the_eager_one(course_data, tiny_model, device):
    """Two epochs with R-Drop, clipping, weight decay, warm-up then decay, dropout on: the same losses, weights,
    learning rate and loss terms (fp32 rounding: the capturable AdamW computes its step size on the device)."""
    batches = sst_batches(course_data, tiny_model)
    runs = {}
    for graphs in (False, True):
        torch.manual_seed(0)
        model = sentiment_model(tiny_model, 0.1)
        loss = ClassificationLoss(rdrop=RDrop(1.0))
        losses, t = train(model, loss, batches, graphs, device)
        runs[graphs] = losses, params(model), float(t.optimizer.param_groups[0]["lr"]), loss.pop_terms()
    (eager, w_eager, lr_eager, terms_eager), (capt, w_capt, lr_capt, terms_capt) = runs[False], runs[True]
    assert len(capt) == len(eager) == 2 * len(batches)
    torch.testing.assert_close(torch.tensor(capt), torch.tensor(eager), rtol=1e-4, atol=1e-5)
    for k in w_eager:
        torch.testing.assert_close(w_capt[k], w_eager[k], rtol=1e-4, atol=1e-5)
    assert lr_capt == pytest.approx(lr_eager)
    assert terms_capt.keys() == terms_eager.keys() == {"task", "rdrop"}
    assert terms_capt == pytest.approx(terms_eager, rel=1e-4, abs=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_each_captured_shape_steps_only_its_own_parameters(course_data, tiny_model, device):
    """Part 2 in turn over the tasks, one shape per task and width: the heads a step does not use neither get a
    gradient nor move (AdamW skips them, as in the eager step), and the weights end as the eager run's."""
    batches = part2_batches(course_data, tiny_model)
    runs = {}
    for graphs in (False, True):
        torch.manual_seed(0)
        model = MultitaskBERT(multitask_spec(tiny_model, pair_encoding="mixed")).train()
        losses, t = train(model, MultitaskLoss({t: 1.0 for t in MULTITASK}), batches, graphs, device, epochs=1)
        runs[graphs] = losses, params(model), t
    torch.testing.assert_close(torch.tensor(runs[True][0]), torch.tensor(runs[False][0]), rtol=1e-4, atol=1e-5)
    for k, v in runs[False][1].items():
        torch.testing.assert_close(runs[True][1][k], v, rtol=1e-4, atol=1e-5)
    captured = runs[True][2].captured
    assert len(captured.graphs.entries) >= 3  # a shape per task at least
    heads = {"sst": "sst_head", "quora": "para_head", "sts": None}
    names = {id(p): n for n, p in runs[True][2].model.named_parameters()}
    for key, used in captured.used.items():
        task = key[0]
        trained = {names[id(p)] for p in used}
        for other, head in heads.items():
            if head is not None and other != task:
                assert not any(n.startswith(head) for n in trained), (task, head)


@pytest.mark.parametrize("device", DEVICES)
def test_a_resumed_captured_run_equals_a_straight_one(course_data, tiny_model, device):
    """Epoch 1 of 2, the trainer's state saved and loaded into a new trainer (graphs recorded anew), epoch 2: bit
    for bit the straight run's weights. A state saved by the eager path resumes on the captured one too."""
    batches = sst_batches(course_data, tiny_model)

    def run(first, second):
        """Epoch 0 on path `first`, then epoch 1 on path `second` from the saved state (None: no save)."""
        torch.manual_seed(0)
        model = sentiment_model(tiny_model, 0.1)
        loss = ClassificationLoss()
        _, t = train(model, loss, batches, first, device, epochs=1, planned=2)
        if second is None:
            t.run_epoch(iter(batches), loss, len(batches))
            return params(model)
        state, rng = t.state_dict(), (torch.get_rng_state(), torch.cuda.get_rng_state() if device == "cuda" else None)
        model2 = sentiment_model(tiny_model, 0.1)
        model2.load_state_dict(model.state_dict())
        torch.set_rng_state(rng[0])  # as fit puts every random state back
        if rng[1] is not None:
            torch.cuda.set_rng_state(rng[1])
        resumed = build_trainer(model2.to(device), RECIPE, Runtime(device=torch.device(device), graphs=second),
                                len(batches), 2)
        resumed.load_state_dict(state)
        resumed.run_epoch(iter(batches), loss, len(batches))
        return params(model2)

    straight = run(True, None)
    resumed = run(True, True)
    assert all(torch.equal(resumed[k], v) for k, v in straight.items())
    across = run(False, True)  # saved by the eager step, resumed on the captured one
    for k, v in straight.items():
        torch.testing.assert_close(across[k], v, rtol=1e-4, atol=1e-5)


SYNCS = {"aten::_local_scalar_dense", "aten::nonzero", "aten::_unique2", "aten::masked_select", "aten::item"}


class CountSyncs(TorchDispatchMode):
    """Counts the operators that read a value back to the host (.item(), bool(), a data-dependent shape)."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func._schema.name in SYNCS or (func._schema.name == "aten::_to_copy"
                                          and (kwargs or {}).get("device") == torch.device("cpu")
                                          and args[0].device.type != "cpu"):
            self.ops.append(func._schema.name)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("graphs", [False, True])
@pytest.mark.parametrize("device", DEVICES)
def test_no_training_step_reads_back_from_the_device(course_data, tiny_model, device, graphs, monkeypatch):
    """The host reads the device only at an epoch's end and every 50 steps: as many reads for 3 steps as for 9
    (Part 2's losses with MNRL and SimCSE in-batch, R-Drop and SMART's Bregman teacher included). Counting the
    host batch's tokens is host work and left out here, since on the CPU the host batch is on the device."""
    monkeypatch.setattr(trainer_module, "count_tokens", lambda batch: 0)
    batches = part2_batches(course_data, tiny_model, quora="siamese")
    counts = []
    for n in (3, 9):
        torch.manual_seed(0)
        model = MultitaskBERT(multitask_spec(tiny_model, pair_encoding="siamese")).to(device).train()
        loss = MultitaskLoss.from_spec(TaskLosses(weights={t: 1.0 for t in MULTITASK}, mnrl_weight=0.5,
                                                  simcse_weight=0.1),
                                       Regularizers(rdrop_weight=1.0, smart_bregman_weight=0.5), model, 20)
        t = build_trainer(model, RECIPE, Runtime(device=torch.device(device), graphs=graphs), n, 1)
        t.progress_every = 0  # the plain progress line reads the loss back: it comes by the clock, not per step
        t.run_epoch(iter(batches[:3]), loss, 3)  # shapes recorded, lazy state created: not what is counted
        with CountSyncs() as c:
            t.run_epoch(iter(batches[:n]), loss, n)
        counts.append(len(c.ops))
    assert counts[0] == counts[1], counts


def test_the_device_schedule_and_lambdalr_load_each_others_state():
    """A run saved with one schedule resumes with the other at the same step and learning rate."""
    from minbert.training.schedule import DeviceSchedule, make_scheduler
    from optimizer import AdamW
    p = torch.nn.Parameter(torch.zeros(2))
    host = make_scheduler(AdamW([p], lr=1.0), "cosine", 0.1, 20)
    for _ in range(7):
        host.step()
    dev = DeviceSchedule(AdamW([p], lr=1.0, capturable=True), "cosine", 0.1, 20, torch.device("cpu"))
    dev.load_state_dict(host.state_dict())
    assert float(dev.optimizer.param_groups[0]["lr"]) == pytest.approx(host.optimizer.param_groups[0]["lr"])
    dev.step()
    back = make_scheduler(AdamW([p], lr=1.0), "cosine", 0.1, 20)
    back.load_state_dict(dev.state_dict())
    back.step()
    host.step()
    host.step()
    assert back.last_epoch == host.last_epoch == 9
    assert back.get_last_lr() == pytest.approx(host.get_last_lr())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_recorded_graphs_equal_the_eager_step_in_bf16_over_50_steps(course_data, tiny_model):
    """bf16 autocast, 50 steps: the recorded path's losses are the eager path's within bf16's tolerance."""
    batches = (sst_batches(course_data, tiny_model) * 8)[:50]
    losses = {}
    for graphs in (False, True):
        torch.manual_seed(0)
        model = sentiment_model(tiny_model, 0.1).cuda()
        t = build_trainer(model, RECIPE, Runtime(device=torch.device("cuda"), amp="bf16", graphs=graphs), 50, 1)
        seen = []
        t.run_epoch(iter(batches), ClassificationLoss(rdrop=RDrop(1.0)), 50,
                    on_step=lambda step, value, lr: seen.append(value), log_every=1)
        losses[graphs] = seen
    torch.testing.assert_close(torch.tensor(losses[True]), torch.tensor(losses[False]), rtol=2e-2, atol=2e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_replays_draw_new_dropout_masks(course_data, tiny_model):
    """The same batch replayed twice with the learning rate 0: dropout differs, so the losses do."""
    batch = sst_batches(course_data, tiny_model)[0]
    model = sentiment_model(tiny_model, 0.3).cuda()
    t = build_trainer(model, Recipe(lr=0.0, epochs=1), Runtime(device=torch.device("cuda"), graphs=True), 2, 1)
    seen = []
    t.run_epoch(iter([batch, batch]), ClassificationLoss(), 2, on_step=lambda step, value, lr: seen.append(value),
                log_every=1)
    assert len(t.captured.graphs.entries) == 1 and t.captured.graphs.record
    assert seen[0] != seen[1]
    assert to_device(batch, "cuda")["x"]["input_ids"].shape == t.captured.graphs.entries[
        next(iter(t.captured.graphs.entries))][0]["x"]["input_ids"].shape
