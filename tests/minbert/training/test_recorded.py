"""training/recorded.py: the one training step recorded once per batch shape. On the CPU its stand-in runs the same
path eagerly (static inputs, each step from no gradients to none, each shape's own parameters, the capturable AdamW and
the device schedule): it must train as the eager step does, count its updates, move the Bregman teacher, step every
parameter's AdamW count, read its learning rate from the device, and fall back to the eager step in one line when a
recording fails. What cannot be recorded is one list, read alike by the flags' resolver, the Trainer and bench.py.
On a GPU the recorded graphs must train as the eager step does too, resume exactly, and read nothing back to the
host."""
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from datasets import set_fixed_shapes, task_dataset
from minbert.course_data import MULTITASK, data_file, read_examples
from minbert.objectives.losses import ClassificationLoss, MultitaskLoss
from minbert.objectives.rdrop import RDrop
from minbert.objectives.smart import BregmanProximal
from minbert.objectives.regularizers import Regularizers
from minbert.specs import Recipe, Runtime, TaskLosses
from minbert.tasks.multitask import MultitaskBERT
from minbert.training import recorded as recorded_module
from minbert.training import trainer as trainer_module
from minbert.training.recorded import RecordedFunction, RecordedStep, cannot_record
from minbert.training.schedule import DeviceSchedule, make_scheduler
from minbert.training.step import TrainingStep
from minbert.training.trainer import Trainer, build_trainer
from optimizer import AdamW, Lamb, Lion
from tests.checkpoints import multitask_spec, sentiment_model
from tests.processes import DEVICES
from tokenizer import BertTokenizer
from utils import MinbertError, to_device

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


def train(model, loss, batches, record, device, epochs=2, planned=None, recipe=RECIPE):
    """Train `model` over `batches` for `epochs` epochs of a schedule over `planned` (default `epochs`) with the
    eager or the recorded step; returns (per-step losses, the trainer)."""
    model.to(device)
    t = build_trainer(model, loss, recipe, Runtime(device=torch.device(device), record_step=record), len(batches),
                      planned or epochs)
    losses = []
    for _ in range(epochs):
        t.run_epoch(iter(batches), len(batches), on_step=lambda step, value, lr: losses.append(value), log_every=1)
    return losses, t


def adam_steps(optimizer, model):
    """{parameter name: AdamW's step count of it} (absent: never stepped)."""
    names = {id(p): n for n, p in model.named_parameters()}
    return {names[id(p)]: float(st["step"]) for p, st in optimizer.state.items() if st}


def params(model):
    return {k: v.detach().cpu().clone() for k, v in model.named_parameters()}


@pytest.mark.parametrize("device", DEVICES)
def test_the_recorded_part1_step_trains_as_the_eager_one(course_data, tiny_model, device):
    """Two epochs with R-Drop, SMART's Bregman teacher, clipping, weight decay, warm-up then decay, dropout on: the
    same losses, weights, learning rate, loss terms, teacher, update count and AdamW step count of every parameter
    (fp32 rounding: the capturable AdamW computes its step size on the device)."""
    batches = sst_batches(course_data, tiny_model)
    runs = {}
    for record in (False, True):
        torch.manual_seed(0)
        model = sentiment_model(tiny_model, 0.1)
        bregman = BregmanProximal(model.to(device), 0.5, None, 2 * len(batches))
        start = [t.clone() for t in bregman.teacher()]
        loss = ClassificationLoss(rdrop=RDrop(1.0), bregman=bregman)
        losses, t = train(model, loss, batches, record, device)
        assert not any(torch.equal(a, b) for a, b in zip(start, bregman.teacher()))  # the teacher followed
        runs[record] = (losses, params(model), float(t.optimizer.param_groups[0]["lr"]), loss.pop_terms(),
                        [x.cpu() for x in bregman.teacher()], t.updates, adam_steps(t.optimizer, model))
    (eager, w_eager, lr_eager, terms_eager, teacher_eager, updates_eager, adam_eager) = runs[False]
    (rec, w_rec, lr_rec, terms_rec, teacher_rec, updates_rec, adam_rec) = runs[True]
    assert len(rec) == len(eager) == 2 * len(batches)
    torch.testing.assert_close(torch.tensor(rec), torch.tensor(eager), rtol=1e-4, atol=1e-5)
    for k in w_eager:
        torch.testing.assert_close(w_rec[k], w_eager[k], rtol=1e-4, atol=1e-5, msg=k)
    assert lr_rec == pytest.approx(lr_eager)
    assert terms_rec.keys() == terms_eager.keys() == {"task", "rdrop", "bregman"}
    assert terms_rec == pytest.approx(terms_eager, rel=1e-4, abs=1e-6)
    for a, b in zip(teacher_rec, teacher_eager):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    assert updates_rec == updates_eager == 2 * len(batches)
    assert adam_rec == adam_eager and set(adam_rec.values()) == {2.0 * len(batches)}


@pytest.mark.parametrize("device", DEVICES)
def test_each_recorded_shape_steps_only_its_own_parameters(course_data, tiny_model, device):
    """Part 2 in turn over the tasks, one shape per task and width: the heads a step does not use neither get a
    gradient nor move (AdamW skips them, as in the eager step), the weights end as the eager run's, and AdamW
    has counted each parameter's steps as the eager run did."""
    batches = part2_batches(course_data, tiny_model)
    runs = {}
    for record in (False, True):
        torch.manual_seed(0)
        model = MultitaskBERT(multitask_spec(tiny_model, pair_encoding="mixed")).train()
        losses, t = train(model, MultitaskLoss({t: 1.0 for t in MULTITASK}), batches, record, device, epochs=1)
        runs[record] = losses, params(model), t, adam_steps(t.optimizer, model)
    torch.testing.assert_close(torch.tensor(runs[True][0]), torch.tensor(runs[False][0]), rtol=1e-4, atol=1e-5)
    for k, v in runs[False][1].items():
        torch.testing.assert_close(runs[True][1][k], v, rtol=1e-4, atol=1e-5)
    stepped = {k: v for k, v in runs[True][3].items() if v}  # the recorded step made every parameter's state
    assert stepped == runs[False][3] and len(set(stepped.values())) > 1  # the heads stepped apart
    assert len(runs[True][2].recorded.recorded.entries) >= 3  # a shape per task at least
    per_task = {task: sum(b["task"] == task for b in batches) for task in MULTITASK}
    for head, task in (("sst_head", "sst"), ("para_head", "quora")):
        counts = {v for k, v in stepped.items() if k.startswith(head)}
        assert counts == {float(per_task[task])}, (head, counts)  # stepped by its own task's batches alone
    assert max(stepped.values()) == len(batches)  # the backbone by every batch


@pytest.mark.parametrize("device", DEVICES)
def test_graphs_replayed_out_of_recording_order_train_as_the_eager_step(course_data, tiny_model, device):
    """Part 2's shapes A (SST), B (Quora), C (STS) replayed A, B, A, C, A, B, C, B, A: the graphs share one memory pool
    and replay in data order, not in the order they were recorded, and must still give the eager step's losses and
    weights (bf16 on a GPU, to bf16's tolerance; fp32 on the CPU)."""
    by_task = {}
    for b in part2_batches(course_data, tiny_model):
        by_task.setdefault(b["task"], []).append(b)
    (a, b_, c) = (by_task[t] for t in MULTITASK)
    order = [a[0], b_[0], a[1], c[0], a[2], b_[1], c[1], b_[2], a[0]]
    amp = "bf16" if device == "cuda" else "none"
    runs = {}
    for record in (False, True):
        torch.manual_seed(0)
        model = MultitaskBERT(multitask_spec(tiny_model, pair_encoding="mixed")).train().to(device)
        t = build_trainer(model, MultitaskLoss({t: 1.0 for t in MULTITASK}), RECIPE,
                          Runtime(device=torch.device(device), amp=amp, record_step=record), len(order), 1)
        losses = []
        t.run_epoch(iter(order), len(order), on_step=lambda step, value, lr: losses.append(value), log_every=1)
        runs[record] = losses, params(model), t.recorded_shapes()
    assert runs[True][2] >= 3  # a graph per task at least, replayed out of their recording order
    tol = dict(rtol=2e-2, atol=2e-3) if amp == "bf16" else dict(rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.tensor(runs[True][0]), torch.tensor(runs[False][0]), **tol)
    for k, v in runs[False][1].items():
        torch.testing.assert_close(runs[True][1][k], v, **tol, msg=k)


@pytest.mark.parametrize("device", DEVICES)
def test_a_resumed_recorded_run_equals_a_straight_one(course_data, tiny_model, device):
    """Epoch 1 of 2, the trainer's state saved and loaded into a new trainer (graphs recorded anew), epoch 2: bit
    for bit the straight run's weights. A state saved by the eager step resumes on the recorded one too."""
    batches = sst_batches(course_data, tiny_model)

    def run(first, second):
        """Epoch 0 on path `first`, then epoch 1 on path `second` from the saved state (None: no save)."""
        torch.manual_seed(0)
        model = sentiment_model(tiny_model, 0.1)
        loss = ClassificationLoss()
        _, t = train(model, loss, batches, first, device, epochs=1, planned=2)
        if second is None:
            t.run_epoch(iter(batches), len(batches))
            return params(model)
        state, rng = t.state_dict(), (torch.get_rng_state(), torch.cuda.get_rng_state() if device == "cuda" else None)
        model2 = sentiment_model(tiny_model, 0.1)
        model2.load_state_dict(model.state_dict())
        torch.set_rng_state(rng[0])  # as fit puts every random state back
        if rng[1] is not None:
            torch.cuda.set_rng_state(rng[1])
        resumed = build_trainer(model2.to(device), loss, RECIPE,
                                Runtime(device=torch.device(device), record_step=second), len(batches), 2)
        resumed.load_state_dict(state)
        resumed.run_epoch(iter(batches), len(batches))
        return params(model2)

    straight = run(True, None)
    resumed = run(True, True)
    assert all(torch.equal(resumed[k], v) for k, v in straight.items())
    across = run(False, True)  # saved by the eager step, resumed on the recorded one
    for k, v in straight.items():
        torch.testing.assert_close(across[k], v, rtol=1e-4, atol=1e-5)


def test_a_recorded_run_saves_the_eager_form_and_a_resumed_one_reads_the_schedules_device_tensors(course_data,
                                                                                                 tiny_model):
    """The optimizer state a recorded run saves is the eager step's form (learning rates and step counts as numbers,
    no group capturable), so either step loads it; and a recorded trainer that loads a state has each group read its
    learning rate from the schedule's device tensor again, at the saved step's value: a number left in a group by
    the optimizer's load_state_dict would be frozen into the graphs recorded next."""
    batches = sst_batches(course_data, tiny_model)[:3]
    _, t = train(sentiment_model(tiny_model, 0.1), ClassificationLoss(), batches, True, "cpu", epochs=1, planned=2)
    state = t.state_dict()
    assert all(type(g["lr"]) is float and g["capturable"] is False for g in state["optimizer"]["param_groups"])
    assert {type(s["step"]) for s in state["optimizer"]["state"].values()} == {int}
    resumed = build_trainer(sentiment_model(tiny_model, 0.1), ClassificationLoss(), RECIPE, Runtime(record_step=True),
                            len(batches), 2)
    tensors = [g["lr"] for g in resumed.optimizer.param_groups]
    assert all(torch.is_tensor(lr) for lr in tensors)
    resumed.load_state_dict(state)
    assert all(g["lr"] is lr for g, lr in zip(resumed.optimizer.param_groups, tensors))
    assert [float(lr) for lr in tensors] == pytest.approx([float(g["lr"]) for g in t.optimizer.param_groups])
    assert float(tensors[0]) != pytest.approx(RECIPE.lr)  # the schedule had moved: the value is the saved one


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


@pytest.mark.parametrize("record", [False, True])
@pytest.mark.parametrize("device", DEVICES)
def test_no_training_step_reads_back_from_the_device(course_data, tiny_model, device, record, monkeypatch):
    """The host reads the device only at an epoch's end and every 50 steps: as many reads for 3 steps as for 9
    (Part 2's losses with MNRL and SimCSE in-batch, R-Drop and SMART's Bregman teacher included), with every
    step's loss and rate logged for TensorBoard too (read back with the mean). Counting the
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
        t = build_trainer(model, loss, RECIPE, Runtime(device=torch.device(device), record_step=record), n, 1)
        t.progress_every = 0  # a progress line at every step: it shows the last loss read back, no sync of its own
        t.run_epoch(iter(batches[:3]), 3)  # shapes recorded, lazy state created: not what is counted
        logged = []
        with CountSyncs() as c:
            t.run_epoch(iter(batches[:n]), n, on_step=lambda *a: logged.append(a), log_every=1)
        counts.append(len(c.ops))
        assert [a[0] for a in logged] == list(range(4, 4 + n))  # every step, in order, after the first epoch's 3
    assert counts[0] == counts[1], counts


def test_the_device_schedule_and_lambdalr_load_each_others_state():
    """A run saved with one schedule resumes with the other at the same step and learning rate."""
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
    """bf16 autocast, 50 steps: the recorded step's losses are the eager step's within bf16's tolerance."""
    batches = (sst_batches(course_data, tiny_model) * 8)[:50]
    losses = {}
    for record in (False, True):
        torch.manual_seed(0)
        model = sentiment_model(tiny_model, 0.1).cuda()
        t = build_trainer(model, ClassificationLoss(rdrop=RDrop(1.0)), RECIPE,
                          Runtime(device=torch.device("cuda"), amp="bf16", record_step=record), 50, 1)
        seen = []
        t.run_epoch(iter(batches), 50, on_step=lambda step, value, lr: seen.append(value), log_every=1)
        losses[record] = seen
    torch.testing.assert_close(torch.tensor(losses[True]), torch.tensor(losses[False]), rtol=2e-2, atol=2e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_a_compiled_recorded_step_equals_the_compiled_eager_step_in_bf16(course_data, tiny_model):
    """--compile with the recorded step: Inductor's forward and backward and AdamW's compiled update, compiled in
    the warm-up and then recorded, give the compiled eager step's losses within bf16's tolerance over 20 steps, and
    the recorded run's update was the compiled one."""
    from utils import maybe_compile
    batches = (sst_batches(course_data, tiny_model) * 3)[:20]
    losses = {}
    for record in (False, True):
        torch.manual_seed(0)
        model = maybe_compile(sentiment_model(tiny_model, 0.1).cuda(), True)
        t = build_trainer(model, ClassificationLoss(), RECIPE,
                          Runtime(device=torch.device("cuda"), amp="bf16", record_step=record, compile=True), 20, 1)
        assert t.optimizer.compiled == record  # an eager step takes torch's one-pass fused kernel
        seen = []
        t.run_epoch(iter(batches), 20, on_step=lambda step, value, lr: seen.append(value), log_every=1)
        losses[record] = seen
    assert t.recorded is not None and t.recorded.recorded.record and t.recorded.recorded.entries
    torch.testing.assert_close(torch.tensor(losses[True]), torch.tensor(losses[False]), rtol=2e-2, atol=2e-2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_replays_draw_new_dropout_masks(course_data, tiny_model):
    """The same batch replayed twice with the learning rate 0: dropout differs, so the losses do."""
    batch = sst_batches(course_data, tiny_model)[0]
    model = sentiment_model(tiny_model, 0.3).cuda()
    t = build_trainer(model, ClassificationLoss(), Recipe(lr=0.0, epochs=1),
                      Runtime(device=torch.device("cuda"), record_step=True), 2, 1)
    seen = []
    t.run_epoch(iter([batch, batch]), 2, on_step=lambda step, value, lr: seen.append(value), log_every=1)
    entries = t.recorded.recorded.entries
    assert len(entries) == 1 and t.recorded.recorded.record
    assert seen[0] != seen[1]
    assert to_device(batch, "cuda")["x"]["input_ids"].shape == entries[next(iter(entries))][0]["x"]["input_ids"].shape


def test_a_recording_that_fails_falls_back_to_the_eager_step_in_one_line(course_data, tiny_model, monkeypatch,
                                                                          capsys):
    """The second batch shape's recording raises (as a CUDA capture can): one line says so, the eager step takes
    that batch and the rest, every batch is trained and counted, and the run ends as an eager run does."""
    batches = part2_batches(course_data, tiny_model)[:6]
    assert len({recorded_module.shape_key(b) for b in batches}) >= 2
    real_capture, calls = RecordedFunction.capture, []

    def failing(self, static):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("operation not permitted when stream is capturing\nmore detail")
        return real_capture(self, static)
    monkeypatch.setattr(RecordedFunction, "capture", failing)
    runs = {}
    for record in (False, True):
        torch.manual_seed(0)
        model = MultitaskBERT(multitask_spec(tiny_model, pair_encoding="mixed")).train()
        losses, t = train(model, MultitaskLoss({t: 1.0 for t in MULTITASK}), batches, record, "cpu", epochs=1)
        runs[record] = losses, params(model), t
    out = capsys.readouterr().out
    fell_back = [line for line in out.splitlines() if "eagerly from here on" in line]
    assert fell_back == ["train: recording a new batch shape failed (RuntimeError: operation not permitted when "
                         "stream is capturing); the training step runs eagerly from here on"]
    (eager, w_eager, _), (rec, w_rec, t) = runs[False], runs[True]
    assert t.recorded is None and t.updates == t.batches == len(batches) == len(rec)
    torch.testing.assert_close(torch.tensor(rec), torch.tensor(eager), rtol=1e-4, atol=1e-5)
    for k in w_eager:
        torch.testing.assert_close(w_rec[k], w_eager[k], rtol=1e-4, atol=1e-5)


def test_the_recorded_step_reads_its_learning_rate_from_a_device_tensor_rewritten_in_place(course_data, tiny_model):
    """A graph freezes every Python number it reads: the recorded step's learning rate is one tensor per group,
    the same tensor all run long, its value following the schedule; a host schedule is refused in one line."""
    batches = sst_batches(course_data, tiny_model)
    model = sentiment_model(tiny_model, 0.1)
    t = build_trainer(model, ClassificationLoss(), RECIPE, Runtime(record_step=True), len(batches), 2)
    assert isinstance(t.scheduler, DeviceSchedule)
    lr = t.optimizer.param_groups[0]["lr"]
    seen = []
    t.run_epoch(iter(batches), len(batches), on_step=lambda step, value, rate: seen.append(rate), log_every=1)
    assert t.optimizer.param_groups[0]["lr"] is lr and torch.is_tensor(lr)
    host = make_scheduler(AdamW([torch.nn.Parameter(torch.zeros(1))], lr=RECIPE.lr), RECIPE.scheduler,
                          RECIPE.warmup_ratio, 2 * len(batches))
    expected = []
    for _ in batches:
        host.step()
        expected.append(host.get_last_lr()[0])
    assert seen == pytest.approx(expected)
    step = TrainingStep(model, ClassificationLoss(), t.optimizer, make_scheduler(t.optimizer, "linear", 0.1, 9))
    with pytest.raises(MinbertError, match="needs the learning rate on the device .* not a LambdaLR"):
        RecordedStep(step)


@pytest.mark.parametrize("optimizer", [Lion, Lamb])
def test_a_trainer_built_with_an_optimizer_that_cannot_be_recorded_says_so_in_one_line(optimizer):
    model = torch.nn.Linear(2, 2)
    name = optimizer.__name__.lower()
    with pytest.raises(MinbertError, match=f"cannot take --optimizer {name} reads its learning rate as a number"):
        Trainer(model, ClassificationLoss(), optimizer(model.parameters()), runtime=Runtime(record_step=True))


def test_what_cannot_be_recorded_is_one_list_read_by_the_resolver_the_trainer_and_bench(monkeypatch, tiny_model):
    """A row added to CANNOT_RECORD reaches the start line, the Trainer's refusal and bench.py's, each one line."""
    from minbert.bench.candidate import Candidate
    from minbert.flags.defaults import resolve_record_step
    from minbert.specs import BenchSettings
    from tokenizer import BertTokenizer
    from config import BertConfig
    assert cannot_record(Recipe(lr=1e-3), "bf16") == []
    assert cannot_record(Recipe(lr=1e-3, grad_accum=2), "fp16") == [
        "fp16's loss scaler reads every step's gradients back to skip the steps that overflow",
        "--grad_accum 2 steps the optimizer every few batches"]
    assert cannot_record(Recipe(lr=1e-3, surgery="pcgrad", gradual_unfreeze=2, optimizer="lion"), "none", 2, True) == [
        "2 processes: DistributedDataParallel reduces the gradients outside the step",
        "--pcgrad combines the task gradients on the host", "--sampler all puts a batch of every task in each step",
        "--gradual_unfreeze changes which parameters train during the run",
        "--optimizer lion reads its learning rate as a number (only AdamW's step takes it from the device)"]
    monkeypatch.setattr(recorded_module, "CANNOT_RECORD", recorded_module.CANNOT_RECORD + (
        ("amp", lambda amp: amp == "none", "a new reason, {}"),))
    on, why = resolve_record_step({"record_step": True}, Recipe(lr=1e-3), torch.device("cuda"), "none", 1)
    assert not on and why == "eager (the recorded step, a GPU's default, cannot take a new reason, none)"
    model = torch.nn.Linear(2, 2)
    with pytest.raises(MinbertError, match="cannot take a new reason, none: run it with --no_record_step"):
        Trainer(model, ClassificationLoss(), AdamW(model.parameters()), runtime=Runtime(record_step=True))
    settings = BenchSettings(runtime=Runtime(), data="synthetic", seq_len=8, batch_size=2, steps=1, warmup=0)
    with pytest.raises(MinbertError, match="the recorded training step cannot take a new reason, none"):
        Candidate(settings, BertTokenizer.from_pretrained(str(tiny_model)),
                  BertConfig.from_json_file(str(tiny_model / "config.json")), "plain", record_step=True)
