"""The training-recipe levers: schedules, clipping, early stopping, layer-wise lr decay, SMART, PCGrad."""
import json
import math

import pytest
import torch

import classifier
from checkpoint import ModelSpec
from conftest import interrupt_second_epoch, part1_args
from flags import FULL_MODEL_LR, WIDE_LR, resolve_lr
import multitask_classifier as mt
from optimizer import AdamW
from pcgrad import project_conflicting
from schedule import layer_depth, lr_factor, make_scheduler, param_groups
from trainer import EarlyStopping, Trainer
from utils import MinbertError


# ----------------------------------------------------------------------------- schedules

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
    assert layer_depth("bert.bert_layers.1.interm_dense.weight", 2) == 0
    assert layer_depth("bert.bert_layers.0.interm_dense.weight", 2) == 1
    assert layer_depth("bert.word_embedding.weight", 2) == 2
    assert layer_depth("classifier.weight", 2) == 0
    groups = param_groups(model, 1e-3, llrd=0.5, head_lr=5e-3)
    rate = {id(p): g["lr"] for g in groups for p in g["params"]}
    assert rate[id(model.classifier.weight)] == 5e-3
    assert rate[id(model.bert.bert_layers[1].out_dense.weight)] == pytest.approx(1e-3)
    assert rate[id(model.bert.bert_layers[0].out_dense.weight)] == pytest.approx(5e-4)
    assert rate[id(model.bert.word_embedding.weight)] == pytest.approx(2.5e-4)
    assert rate[id(model.bert.pooler_dense.weight)] == pytest.approx(1e-3)
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    assert len(param_groups(model, 1e-3)) == 1  # llrd 1.0: one group, as before


def test_clipping_bounds_the_global_gradient_norm():
    model = torch.nn.Linear(4, 3)
    t = Trainer(model, AdamW(model.parameters(), lr=0.0), torch.device("cpu"), max_grad_norm=0.5)
    seen = {}

    def spy(closure=None):
        seen["norm"] = torch.cat([p.grad.flatten() for p in model.parameters()]).norm().item()
    t.optimizer.step = spy
    batch = {"x": torch.randn(8, 4) * 100, "labels": torch.randint(0, 3, (8,)), "index": torch.arange(8)}
    t.run_epoch(iter([batch]), lambda m, b: torch.nn.functional.cross_entropy(m(b["x"]), b["labels"]) * 100, total=1)
    assert seen["norm"] == pytest.approx(0.5, rel=1e-4)


def test_resume_with_a_scheduler_equals_an_uninterrupted_run(tmp_path, course_data, tiny_model, monkeypatch):
    def args(d):
        return part1_args(tmp_path / d, course_data, tiny_model, "--fine-tune-mode", "full-model", "--datasets", "sst",
                          "--epochs", "3", "--lr", "1e-3", "--scheduler", "cosine", "--warmup_ratio", "0.2",
                          "--max_grad_norm", "1.0")
    classifier.main(args("straight"))
    restore = interrupt_second_epoch(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        classifier.main(args("resumed"))
    restore()
    classifier.main(args("resumed") + ["--resume"])

    def log(d):
        return [json.loads(l) for l in (tmp_path / d / "ck" / "full-model-sst-log.jsonl").read_text().splitlines()]
    assert [r["lr"] for r in log("resumed")] == pytest.approx([r["lr"] for r in log("straight")])
    assert log("straight")[0]["lr"] != log("straight")[2]["lr"]  # the schedule did move
    for split in ("dev", "test"):
        name = f"full-model-sst-{split}-out.csv"
        assert (tmp_path / "resumed" / "pred" / name).read_text() == (tmp_path / "straight" / "pred" / name).read_text()


# ----------------------------------------------------------------------------- early stopping

def test_early_stopping_on_a_scripted_score_sequence():
    stop = EarlyStopping(patience=2)
    scores = [0.50, 0.60, 0.58, 0.61, 0.60, 0.59, 0.70]
    stopped_after = None
    for epoch, s in enumerate(scores):
        stop.update(s, epoch)
        if stop.should_stop:
            stopped_after = epoch
            break
    assert stopped_after == 5 and stop.best_epoch == 3 and stop.best == 0.61
    assert "not improved for 2 epoch(s) since epoch 3" in stop.reason()
    never = EarlyStopping(patience=0)
    for epoch, s in enumerate([0.5, 0.4, 0.3, 0.2]):
        never.update(s, epoch)
    assert not never.should_stop


def test_multitask_stops_early_and_keeps_the_best_epoch(tmp_path, course_data, tiny_model, monkeypatch, capsys):
    script = iter([0.5, 0.7, 0.6, 0.65, 0.9, 0.9])
    real = mt.model_eval_multitask

    def scripted(model, data, *a, **kw):
        scores, preds = real(model, data, *a, **kw)
        if "raw" in kw:  # the final scoring, for the files: real scores
            return scores, preds
        m = next(script)
        return {"sst": m, "quora": m, "sts": 2 * m - 1}, preds
    monkeypatch.setattr(mt, "model_eval_multitask", scripted)
    ck = tmp_path / "ck" / "mt.pt"
    outs = [f"--{t}_{s}_out={tmp_path / f'{t}-{s}.csv'}" for t in ("sst", "para", "sts") for s in ("dev", "test")]
    mt.main(["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--epochs", "6", "--batch_size", "8",
             "--patience", "2", "--checkpoint", str(ck), "--results", str(tmp_path / "r.csv"), *outs])
    out = capsys.readouterr().out
    assert "stopping early: the dev mean has not improved for 2 epoch(s) since epoch 1" in out
    log = [json.loads(l) for l in (ck.parent / "mt-log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log if "stopped" not in r] == [0, 1, 2, 3] and "stopped" in log[-1]
    assert torch.load(ck, weights_only=True)["epoch"] == 1


# ----------------------------------------------------------------------------- PCGrad

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


@pytest.mark.parametrize("extra", [["--sampler", "all"], ["--sampler", "all", "--pcgrad"],
                                   ["--smart_weight", "1.0"], ["--rdrop_weight", "1.0"],
                                   ["--smart_bregman_weight", "1.0"],
                                   ["--pair_encoding", "siamese", "--smart_weight", "1.0", "--rdrop_weight", "1.0"]])
def test_multitask_runs_with_every_lever(tmp_path, course_data, tiny_model, extra):
    """Each lever alone (the others off), and each one shows that it acted."""
    outs = [f"--{t}_{s}_out={tmp_path / f'{t}-{s}.csv'}" for t in ("sst", "para", "sts") for s in ("dev", "test")]
    scores = mt.main(["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--epochs", "2",
                      "--batch_size", "8", "--fine-tune-mode", "full-model", "--lr", "1e-3", "--llrd", "0.8",
                      "--smart_weight", "0", "--rdrop_weight", "0", "--checkpoint", str(tmp_path / "ck" / "mt.pt"), "--results",
                      str(tmp_path / "r.csv"), *outs, *extra])
    assert set(scores) == {"sst", "quora", "sts"} and all(math.isfinite(v) for v in scores.values())
    log = [json.loads(l) for l in (tmp_path / "ck" / "mt-log.jsonl").read_text().splitlines()]
    terms = log[0]["loss_terms"]
    for flag, term in (("--smart_weight", "smart"), ("--rdrop_weight", "rdrop"), ("--smart_bregman_weight", "bregman")):
        assert (term in terms and terms[term] > 0) == (flag in extra), (flag, terms)
    assert ("pcgrad_conflicts" in log[0]) == ("--pcgrad" in extra)
    if "--pcgrad" in extra:  # three tasks' gradients, compared pairwise every step: some pairs conflict
        assert sum(r["pcgrad_conflicts"] for r in log) > 0
    if "all" in extra:
        assert log[0]["batches"]["sst"] == log[0]["batches"]["quora"] == log[0]["batches"]["sts"]
    saved = torch.load(tmp_path / "ck" / "mt.pt", weights_only=True)
    siamese = "siamese" in extra  # the siamese path: [u, v, |u-v|, u*v] into the paraphrase head, no STS head
    assert (saved["model"]["para_head.1.weight"].shape[1] == 4 * 32) == siamese
    assert ("sts_head.1.weight" in saved["model"]) != siamese


def test_pcgrad_needs_the_all_sampler():
    with pytest.raises(MinbertError, match="--pcgrad needs the gradients of every task in one step"):
        mt.get_args(["--pcgrad"])


def test_smart_refuses_cached_features():
    with pytest.raises(MinbertError, match="last-linear-layer trains on cached"):
        classifier.get_args(["--smart_weight", "1", "--fine-tune-mode", "last-linear-layer"])


def test_handout_recipe_is_one_flag_away():
    best, plain = mt.get_args([]), mt.get_args(["--recipe", "handout"])
    resolve_lr(best, 384)
    assert (best.fine_tune_mode, best.batch_size, best.lr, best.hidden_dropout_prob) == ("full-model", 32, 1e-4, 0.1)
    assert (best.scheduler, best.warmup_ratio, best.max_grad_norm) == ("linear", 0.1, 0.0)
    assert (best.rdrop_weight, best.smart_weight, best.smart_bregman_weight) == (2.0, 0.0, 0.0)  # R-Drop
    assert (plain.fine_tune_mode, plain.batch_size, plain.lr, plain.hidden_dropout_prob) == \
        ("last-linear-layer", 8, 1e-5, 0.3)
    assert (plain.scheduler, plain.warmup_ratio, plain.max_grad_norm, plain.smart_weight, plain.rdrop_weight) == \
        ("constant", 0.0, 0.0, 0.0, 0.0)
    assert mt.get_args(["--recipe=handout", "--lr", "3e-5"]).lr == 3e-5  # explicit flags win
    p1, h1 = classifier.get_args(["--fine-tune-mode", "full-model"]), \
        classifier.get_args(["--fine-tune-mode", "full-model", "--recipe", "handout"])
    resolve_lr(p1, 384)
    assert p1.lr == FULL_MODEL_LR["best"] and (p1.scheduler, p1.max_grad_norm, p1.smart_weight, p1.rdrop_weight) == \
        ("linear", 0.0, 0.0, 0.0)  # Part 1: no regulariser measured above the baseline
    llr = classifier.get_args([])  # last-linear-layer trains on cached features: no regulariser
    assert (llr.smart_weight, llr.rdrop_weight) == (0.0, 0.0)
    assert h1.lr == 1e-5 and (h1.scheduler, h1.warmup_ratio, h1.max_grad_norm, h1.smart_weight) == \
        ("constant", 0.0, 0.0, 0.0)


def test_default_lr_follows_the_checkpoints_width():
    """MiniLM's measured 1e-4 for narrow checkpoints; the BERT paper's range from bert-base's 768 up."""
    narrow, wide = mt.get_args([]), mt.get_args([])
    assert "384 < 768: the best measured" in resolve_lr(narrow, 384) and narrow.lr == 1e-4
    assert "768 >= 768" in resolve_lr(wide, 768) and wide.lr == WIDE_LR
    lora = mt.get_args(["--fine-tune-mode", "lora"])
    resolve_lr(lora, 768)
    assert lora.lr == 1e-3  # only new weights train
    given = mt.get_args(["--lr", "7e-5"])
    assert resolve_lr(given, 768) == "lr 7e-05" and given.lr == 7e-5


def test_a_no_switch_is_named_as_typed():
    """--no_foreach and --no_bucket store foreach and bucket: messages name the switch the user typed."""
    import flags
    from utils import MinbertError
    with pytest.raises(MinbertError, match="^--no_foreach switches off AdamW's multi-tensor kernels"):
        flags.parse_multitask(["--optimizer", "lion", "--no_foreach"])
    with pytest.raises(MinbertError, match="--no_bucket given in the checkpoint's run, not given now"):
        flags.check_same_run({"bucket": False}, {"bucket": True}, "ck.pt")
