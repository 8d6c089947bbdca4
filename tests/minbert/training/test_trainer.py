"""trainer.fit, the one epoch protocol: a Part 2 run interrupted after an epoch and resumed writes what an
uninterrupted run writes; every pipeline's log has one schema; the handout's names are where it says; no
library module imports a pipeline script."""
import json
import os
import subprocess
import sys

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import classifier
from minbert.objectives.losses import ClassificationLoss, TermLoss
from minbert.objectives.rdrop import RDrop
from minbert.specs import Recipe, Runtime
from minbert.training.trainer import Trainer, count_tokens, describe_trainable
from optimizer import AdamW
from tests.checkpoints import make_hf_checkpoint, sentiment_batch, sentiment_model, tiny_config
from tests.course import ROOT, write_course_data
from tests.processes import run_main



class Loss(TermLoss):
    """A plain function as the Trainer takes a loss."""

    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, model, batch):
        return self.fn(model, batch)


# ----------------------------------------------------------------------------- a run that diverges stops and says so


def test_under_fp16_a_non_finite_loss_is_left_to_the_grad_scaler():
    """fp16's grad scaler skips a step whose gradients overflow; only without it is a NaN loss divergence."""
    from optimizer import AdamW
    from minbert.training.trainer import Diverged, Trainer
    model = torch.nn.Linear(2, 2)
    t = Trainer(model, TermLoss(), AdamW(model.parameters(), lr=1e-3))
    with pytest.raises(Diverged, match="became infinite by step 3 of 9"):
        t.check_finite(float("inf"), 3, 9)
    t.step.scaler = torch.amp.GradScaler("cpu", enabled=True)
    t.check_finite(float("nan"), 3, 9)


@pytest.mark.parametrize("amp", ["bf16", "fp16"])
def test_amp_training_runs_and_learns(tmp_path, course_data, tiny_model, amp):
    args = ["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--datasets", "cfimdb",
            "--epochs", "6", "--batch_size", "8", "--fine-tune-mode", "full-model", "--lr", "3e-3",
            "--hidden_dropout_prob", "0", "--amp", amp, "--scheduler", "constant", "--max_grad_norm", "0", "--checkpoint_dir", str(tmp_path / "ck"),
            "--predictions_dir", str(tmp_path / "pred")]
    res = classifier.main(args)
    assert res[0]["dev_acc"] >= 0.75
    log = [json.loads(l) for l in (tmp_path / "ck" / "full-model-cfimdb-log.jsonl").read_text().splitlines()]
    assert all(torch.isfinite(torch.tensor(r["train_loss"])) for r in log)
    assert log[-1]["train_loss"] < log[0]["train_loss"]


def test_grad_accum_equals_one_big_batch():
    """Two half batches accumulated make the same step as the whole batch at once."""
    def run(accum, batches):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 3)
        from optimizer import AdamW
        loss = Loss(lambda m, b: torch.nn.functional.cross_entropy(m(b["x"]), b["labels"]))
        t = Trainer(model, loss, AdamW(model.parameters(), lr=0.1), Recipe(lr=0.1, grad_accum=accum))
        t.run_epoch(iter(batches), total=len(batches))
        return model.weight.detach()
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(8, 4, generator=g), torch.randint(0, 3, (8,), generator=g)
    whole = [{"x": x, "labels": y, "index": torch.arange(8)}]
    halves = [{"x": x[:4], "labels": y[:4], "index": torch.arange(4)},
              {"x": x[4:], "labels": y[4:], "index": torch.arange(4)}]
    torch.testing.assert_close(run(1, whole), run(2, halves))


@pytest.mark.parametrize("amp", ["none", "fp16"])
def test_grad_accum_with_a_partial_last_group(amp):
    """3 batches with --grad_accum 2: two optimizer steps, the second on the last batch alone."""
    from optimizer import AdamW
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    opt = AdamW(model.parameters(), lr=0.1)
    loss = Loss(lambda m, b: torch.nn.functional.cross_entropy(m(b["x"]), b["labels"]))
    t = Trainer(model, loss, opt, Recipe(lr=0.1, grad_accum=2), Runtime(amp=amp))
    g = torch.Generator().manual_seed(1)
    batches = [{"x": torch.randn(4, 4, generator=g), "labels": torch.randint(0, 3, (4,), generator=g),
                "index": torch.arange(4)} for _ in range(3)]
    t.run_epoch(iter(batches), total=3)
    assert opt.state[model.weight]["step"] == 2



def test_an_epochs_mean_loss_is_its_own_batches_mean():
    """The first epoch's loss is the mean of its batches' losses, the second's the mean of its own (not over the
    run's batches so far), each computed here from the model as it was at each step."""
    from optimizer import AdamW
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    fn = lambda m, b: torch.nn.functional.cross_entropy(m(b["x"]), b["labels"])  # noqa: E731
    t = Trainer(model, Loss(fn), AdamW(model.parameters(), lr=0.1), Recipe(lr=0.1))
    g = torch.Generator().manual_seed(1)
    batches = [{"x": torch.randn(4, 4, generator=g), "labels": torch.randint(0, 3, (4,), generator=g),
                "index": torch.arange(4)} for _ in range(5)]
    seen, real_step = [], t.train_batch

    def watched(batch, *a, **kw):
        with torch.no_grad():
            seen.append(float(fn(model, batch)))
        return real_step(batch, *a, **kw)
    t.train_batch = watched
    first = t.run_epoch(iter(batches[:3]), total=3)["train_loss"]
    second = t.run_epoch(iter(batches[3:]), total=2)["train_loss"]
    assert first == pytest.approx(sum(seen[:3]) / 3, rel=1e-5)
    assert second == pytest.approx(sum(seen[3:]) / 2, rel=1e-5)


def test_the_schedule_counts_a_partial_accumulation_group_and_an_old_checkpoint_its_updates(tiny_model):
    """5 batches an epoch at --grad_accum 2 are 3 optimizer steps (the last on one batch): the schedule spans
    epochs x 3; a checkpoint of an earlier minbert, which kept only its batches, resumes at batches // 2 updates."""
    from minbert.training.trainer import build_trainer
    model = sentiment_model(tiny_model, 0.0)
    recipe = Recipe(lr=1e-3, epochs=2, grad_accum=2, warmup_ratio=0.0, scheduler="linear")
    t = build_trainer(model, ClassificationLoss(), recipe, Runtime(), steps_per_epoch=5)
    assert t.scheduler.lr_lambdas[0](6) == 0.0 and t.scheduler.lr_lambdas[0](5) > 0  # linear to 0 over 2 x 3
    state = t.state_dict()
    state["batches"] = 10
    del state["updates"]
    t.load_state_dict(state)
    assert t.updates == 5


def test_the_training_batches_take_fixed_shapes_where_the_trainer_is_built_for_a_recorded_step(tiny_model,
                                                                                              course_data):
    """Every pipeline gives build_trainer its training data: a recorded step gets batches of --batch_size rows
    and a few widths (every task's, nested), an eager one keeps its data as it was."""
    from datasets import task_dataset
    from minbert.course_data import data_file, read_examples
    from minbert.training.trainer import build_trainer
    from tokenizer import BertTokenizer
    tokenizer = BertTokenizer.from_pretrained(str(tiny_model))
    data = {task: task_dataset(read_examples(data_file(course_data, task, "train"), task, "train"), task, tokenizer,
                               32) for task in ("sst", "quora")}
    model = sentiment_model(tiny_model, 0.0)
    build_trainer(model, ClassificationLoss(), Recipe(lr=1e-3), Runtime(), 5, train_data=data, rows=8)
    assert all(d.rows == 0 and d.widths == () for d in data.values())
    build_trainer(model, ClassificationLoss(), Recipe(lr=1e-3), Runtime(record_step=True), 5, train_data=data, rows=8)
    for d in data.values():
        assert d.rows == 8 and d.widths and max(d.widths) <= 32
        assert {b["x"]["input_ids"].shape[0] for b in d.batches(8, shuffle=True, seed=0)} == {8}


def test_count_tokens_counts_the_real_rows_of_every_part_only():
    """tokens/s counts the non-pad tokens of the rows that train: a fixed-shape batch's filler rows (weight 0)
    are computed, not counted; a batch holding every task counts each task's part."""
    ids = torch.tensor([[2, 7, 3, 0], [2, 8, 9, 3], [2, 7, 3, 0]])
    x = {"input_ids": ids, "attention_mask": (ids != 0).long()}
    assert count_tokens({"x": x, "labels": torch.zeros(3)}) == 3 + 4 + 3
    assert count_tokens({"x": x, "weight": torch.tensor([1.0, 1.0, 0.0])}) == 3 + 4
    pair = {"a": x, "b": x, "weight": torch.tensor([1.0, 0.0, 0.0])}
    assert count_tokens({"parts": {"sst": {"x": x, "weight": torch.tensor([0.0, 1.0, 1.0])}, "sts": pair}}) == (
        (4 + 3) + 2 * 3)


def test_trainable_line_counts_by_hand(capsys):
    lin = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Linear(4, 2))
    lin[0].weight.requires_grad = False
    info = describe_trainable(lin)
    # trainable: bias 4 + weight 8 + bias 2 = 14 of 12 + 4 + 8 + 2 = 26; AdamW keeps two fp32 tensors of each
    assert info == {"trainable": 14, "total": 26, "optimizer_state_bytes": 2 * 14 * 4}
    assert "trainable parameters: 14 of 26 (53.85%)" in capsys.readouterr().out


def test_clipping_bounds_the_global_gradient_norm():
    model = torch.nn.Linear(4, 3)
    loss = Loss(lambda m, b: torch.nn.functional.cross_entropy(m(b["x"]), b["labels"]) * 100)
    t = Trainer(model, loss, AdamW(model.parameters(), lr=0.0), Recipe(lr=0.0, max_grad_norm=0.5))
    seen = {}

    def spy(closure=None):
        seen["norm"] = torch.cat([p.grad.flatten() for p in model.parameters()]).norm().item()
    t.optimizer.step = spy
    batch = {"x": torch.randn(8, 4) * 100, "labels": torch.randint(0, 3, (8,)), "index": torch.arange(8)}
    t.run_epoch(iter([batch]), total=1)
    assert seen["norm"] == pytest.approx(0.5, rel=1e-4)


# fp32 whatever the CPU: on one with native bf16, --amp auto trains in bf16, where the ranks' different
# summation order is rounded to bf16 and the two runs drift apart by more than the tolerance below.
FP32 = ["--amp", "none"]


# and no SMART: its random perturbation is drawn per rank for that rank's half of the batch, so N ranks draw
# other numbers than one process does (as dropout would; the tiny checkpoint trains without dropout here)
NO_NOISE = FP32 + ["--smart_weight", "0"]


@pytest.fixture
def ddp(tmp_path):
    # 45 examples at batch 8: the last global batch (5) splits unevenly over the two ranks
    data = write_course_data(tmp_path / "data", n_train=45)
    model, _ = make_hf_checkpoint(tmp_path / "tiny", config=tiny_config(hidden_dropout_prob=0.0,
                                                                         attention_probs_dropout_prob=0.0))
    return tmp_path, data, model


# Both pipelines in one torchrun launch (a launcher and two ranks, each importing torch, cost more than the runs):
# each rank runs classifier.py's main, then multitask_classifier.py's, in one process group.
_BOTH = """
import sys
sys.path.insert(0, {root!r})
import classifier, multitask_classifier
from utils import main_guard
main_guard(lambda: (classifier.main({part1!r}), multitask_classifier.main({part2!r})))
"""


def _same_weights(a, b):
    sa, sb = torch.load(a, weights_only=True)["model"], torch.load(b, weights_only=True)["model"]
    assert sa.keys() == sb.keys()
    worst = max(sa, key=lambda k: (sa[k] - sb[k]).abs().max().item())
    diff = (sa[worst] - sb[worst]).abs().max().item()
    assert all(torch.allclose(sa[k], sb[k], atol=1e-5, rtol=1e-4) for k in sa), f"{worst}: max |diff| {diff:.3g}"


def test_ddp_on_two_processes_equals_one_process_for_both_pipelines(ddp):
    """Part 1 and Part 2 under torchrun with two processes train the weights one process trains, rank 0 alone
    logs and writes, and the predictions are the same."""
    tmp, data, model = ddp
    common = ["--pretrained", str(model), "--data_dir", str(data), "--epochs", "2", "--batch_size", "8",
              "--fine-tune-mode", "full-model", "--lr", "1e-3", "--hidden_dropout_prob", "0", *NO_NOISE]

    def part1(d):
        return common + ["--datasets", "sst", "--checkpoint_dir", f"{d}1", "--predictions_dir", f"p{d}"]

    def part2(d):
        return common + ["--checkpoint", f"{d}2/mt.pt", "--results", f"{d}2/r.csv"] + [
            x for t in ("sst", "para", "sts") for s in ("dev", "test") for x in (f"--{t}_{s}_out", f"{d}2/{t}-{s}-output.csv")]
    for script, args in (("classifier.py", part1("one")), ("multitask_classifier.py", part2("one"))):
        out = run_main(script, *args, cwd=tmp)
        assert out.returncode == 0, out.stderr[-3000:]
    driver = tmp / "both.py"
    driver.write_text(_BOTH.format(root=str(ROOT), part1=part1("two"), part2=part2("two")))
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
                          str(driver)], cwd=tmp, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    # only rank 0 logs: Part 1's epoch line once, and each pipeline's last line once
    assert out.stdout.split("predictions copied to", 1)[0].count("sst epoch 1:") == 1
    assert out.stdout.count("predictions copied to") == 2
    _same_weights(tmp / "one1" / "full-model-sst-last.pt", tmp / "two1" / "full-model-sst-last.pt")
    assert len((tmp / "two1" / "full-model-sst-log.jsonl").read_text().splitlines()) == 2
    assert (tmp / "ptwo" / "full-model-sst-test-out.csv").read_text() == (tmp / "pone" / "full-model-sst-test-out.csv").read_text()
    _same_weights(tmp / "one2" / "mt.pt", tmp / "two2" / "mt.pt")
    assert len((tmp / "two2" / "r.csv").read_text().splitlines()) == 2


def test_an_error_under_torchrun_is_said_once(ddp):
    tmp, data, model = ddp
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--standalone",
                          str(ROOT / "multitask_classifier.py"), "--pretrained", str(model), "--data_dir",
                          str(data / "absent")], cwd=tmp, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode != 0
    errors = [l for l in out.stderr.splitlines() if l.startswith("error: ")]
    assert len(errors) == 1 and "data file not found" in errors[0], out.stderr[-3000:]


def test_under_bf16_each_weight_is_cast_once_per_step_even_when_the_loss_runs_two_passes(tiny_model):
    """The step's one autocast region casts each fp32 master weight to bf16 once (autocast's cast cache) and
    R-Drop's second pass reuses the cast; the fp32 masters stay what the optimizer updates."""
    model = sentiment_model(tiny_model, 0.1)
    weights = {p.data_ptr(): n for n, p in model.named_parameters() if p.dim() == 2 and "embedding" not in n}
    casts = []

    class CountCasts(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func is torch.ops.aten._to_copy.default and args[0].data_ptr() in weights:
                casts.append((weights[args[0].data_ptr()], (kwargs or {}).get("dtype")))
            return func(*args, **(kwargs or {}))
    t = Trainer(model, ClassificationLoss(rdrop=RDrop(1.0)), AdamW(model.parameters(), lr=1e-3),
                runtime=Runtime(amp="bf16"))
    with CountCasts():
        t.run_epoch(iter([{**sentiment_batch(), "index": torch.arange(2)}]), total=1)
    assert sorted(n for n, dtype in casts) == sorted(weights.values())  # each matrix once, both passes included
    assert {dtype for _, dtype in casts} == {torch.bfloat16}
    assert all(p.dtype == torch.float32 for p in model.parameters())


def test_an_epoch_reports_every_log_every_th_batch_its_tokens_and_calls_the_hooks_after_each_update():
    """on_step gets (batch count since the run began, that batch's loss, the rate it trained at) at every
    log_every-th batch, counted across epochs; tokens/s is the non-pad tokens over the epoch's seconds; each
    optimizer step calls the hooks with the count of updates so far (2 batches an update, a last one alone)."""
    # (the rate logged is the schedule's after the batch: the next update's, as HF's Trainer logs it)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    fn = lambda m, b: torch.nn.functional.cross_entropy(m(b["x"]["input_ids"].float()), b["labels"])  # noqa: E731
    hooks = []
    opt = AdamW(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: 1.0 / (1 + step))
    t = Trainer(model, Loss(fn), opt, Recipe(lr=0.1, grad_accum=2), scheduler=scheduler, step_hooks=[hooks.append])
    g = torch.Generator().manual_seed(1)
    masks = [torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0]]), torch.tensor([[1, 1, 1, 1], [1, 0, 0, 0]]),
             torch.tensor([[1, 0, 0, 0], [1, 1, 1, 0]])]
    batches = [{"x": {"input_ids": torch.randn(2, 4, generator=g), "attention_mask": masks[i % 3]},
                "labels": torch.randint(0, 3, (2,), generator=g)} for i in range(7)]
    losses, real_step = [], t.train_batch

    def watched(batch, update, *a):
        with torch.no_grad():
            losses.append(float(fn(model, batch)))
        return real_step(batch, update, *a)
    t.train_batch = watched
    seen = []
    stats = t.run_epoch(iter(batches[:5]), total=5, on_step=lambda *a: seen.append(a), log_every=2)
    # batches 2 and 4 each end an update: the rate as it stands after it, 0.1 / (1 + updates so far)
    assert [(n, lr) for n, _, lr in seen] == [(2, pytest.approx(0.1 / 2)), (4, pytest.approx(0.1 / 3))]
    assert [loss for _, loss, _ in seen] == [pytest.approx(losses[1], rel=1e-5), pytest.approx(losses[3], rel=1e-5)]
    assert hooks == [0, 1, 2, 3]  # the epoch's start (0 updates), then after updates 1, 2 and the lone 5th batch
    assert stats["steps"] == 5 and stats["seconds"] > 0
    assert stats["tokens_per_s"] == pytest.approx((5 + 5 + 4 + 5 + 5) / stats["seconds"])
    assert stats["lr"] == pytest.approx(0.1 / 4)
    t.run_epoch(iter(batches[5:]), total=2, on_step=lambda *a: seen.append(a), log_every=2)
    assert [n for n, _, _ in seen] == [2, 4, 6]  # counted since the run began
