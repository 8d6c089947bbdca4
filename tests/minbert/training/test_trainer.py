"""trainer.fit, the one epoch protocol: a Part 2 run interrupted after an epoch and resumed writes what an
uninterrupted run writes; every pipeline's log has one schema; the handout's names are where it says; no
library module imports a pipeline script."""
import ast
import importlib
import json
from pathlib import Path

import pytest
import torch

import multitask_classifier as mt
from conftest import ROOT, interrupt_second_epoch, part1_args, part2_args
from utils import MinbertError


def _files(folder):
    return {p.name: p.read_text() for p in sorted(Path(folder).glob("*-output.csv"))}


@pytest.mark.parametrize("extra", [[], ["--rdrop_weight", "1", "--smart_bregman_weight", "1", "--pair_encoding", "mixed"],
                                   ["--sampler", "all", "--pcgrad"], ["--sampler", "all", "--gradvac"],
                                   ["--gradual_unfreeze", "3", "--optimizer", "lamb", "--shared_head", "8"]])
def test_part2_resumed_after_an_interruption_equals_an_uninterrupted_run(tmp_path, course_data, tiny_model,
                                                                          monkeypatch, extra):
    """The model, optimizer, schedule, random states, each task stream's place, early stopping, the Bregman
    teacher, GradVac's averages and the unfreezing schedule's step all come back: the six files are the same."""
    common = ["--epochs", "3", "--steps_per_epoch", "4", "--patience", "5", *extra]
    straight = mt.main(part2_args(tmp_path / "straight", course_data, tiny_model, *common))
    restore = interrupt_second_epoch(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        mt.main(part2_args(tmp_path / "resumed", course_data, tiny_model, *common))
    restore()
    last = torch.load(tmp_path / "resumed" / "ck" / "mt-last.pt", weights_only=True)
    assert last["epoch"] == 0 and set(last["pipeline_state"]) == {"sst", "quora", "sts"}
    resumed = mt.main(part2_args(tmp_path / "resumed", course_data, tiny_model, *common, "--resume"))
    assert resumed == pytest.approx(straight, abs=1e-6)
    assert _files(tmp_path / "resumed" / "pred") == _files(tmp_path / "straight" / "pred")
    log = [json.loads(l) for l in (tmp_path / "resumed" / "ck" / "mt-log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [0, 1, 2]  # no epoch twice
    with pytest.raises(MinbertError, match=r"cannot resume, the checkpoint comes from another configuration: --lr"):
        mt.main(part2_args(tmp_path / "resumed", course_data, tiny_model, *common, "--resume", "--lr", "3e-3"))


def test_restarting_a_run_folder_without_resume_is_refused(tmp_path, course_data, tiny_model, monkeypatch):
    """The earlier --checkpoint spelling names a run folder too: a new run there would overwrite its best
    checkpoint and append to its log."""
    restore = interrupt_second_epoch(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        mt.main(part2_args(tmp_path, course_data, tiny_model))
    restore()
    before = (tmp_path / "ck" / "mt.pt").read_bytes()
    with pytest.raises(MinbertError, match=r"--run_dir .*ck: already holds a run \(mt-log.jsonl\); choose another, "
                                           r"or add --resume"):
        mt.main(part2_args(tmp_path, course_data, tiny_model))
    assert (tmp_path / "ck" / "mt.pt").read_bytes() == before


def test_every_pipeline_logs_one_schema(tmp_path, course_data, tiny_model):
    import classifier
    import pretrain
    classifier.main(part1_args(tmp_path / "p1", course_data, tiny_model, "--datasets", "sst", "--epochs", "1"))
    mt.main(part2_args(tmp_path / "p2", course_data, tiny_model, "--epochs", "1"))
    texts = tmp_path / "texts.txt"
    texts.write_text("the movie was good\nthe film was bad\nit is a great plot\nthis acting is awful\n" * 5)
    pretrain.main(["--pretrained", str(tiny_model), "--texts", str(texts), "--out", str(tmp_path / "mlm"),
                   "--epochs", "1", "--batch_size", "8", "--max_length", "16"])
    logs = {"classifier": tmp_path / "p1" / "ck" / "last-linear-layer-sst-log.jsonl",
            "multitask": tmp_path / "p2" / "ck" / "mt-log.jsonl", "pretrain": tmp_path / "mlm" / "pretrain-log.jsonl"}
    keys = {"run", "pipeline", "model", "epoch", "train_loss", "loss_terms", "dev", "dev_score", "score_name", "best",
            "seconds", "tokens_per_s", "lr", "steps"}
    for pipeline, path in logs.items():
        record = [json.loads(l) for l in path.read_text().splitlines()][-1]
        assert keys <= set(record) and record["pipeline"] == pipeline, (pipeline, sorted(record))
    import report  # reads all three, one figure of curves per pipeline
    md, figs = report.report(list(logs.values()), tmp_path / "report")
    assert {p.name for p in figs} >= {"curves-classifier.png", "curves-multitask.png", "curves-pretrain.png"}


def test_tensorboard_event_files_hold_the_runs_curves(tmp_path, course_data, tiny_model):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    mt.main(part2_args(tmp_path, course_data, tiny_model, "--steps_per_epoch", "20"))
    events = EventAccumulator(str(tmp_path / "ck" / "tb-mt"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "train/lr", "dev/sst", "dev/quora", "dev/sts", "train/epoch_loss"} <= tags
    assert [e.step for e in events.Scalars("dev/sst")] == [20, 40]  # batches since the start, after each epoch
    mt.main(part2_args(tmp_path / "off", course_data, tiny_model, "--epochs", "1", "--no_tensorboard"))
    assert not list((tmp_path / "off" / "ck").glob("tb-*"))


def test_the_handouts_names_are_where_it_says():
    """Handout sections 3, 4 and 5.2 name these; each is importable from the file it names."""
    names = {"bert": ["BertSelfAttention.attention", "BertLayer.add_norm", "BertLayer.forward", "BertModel.embed"],
             "classifier": ["BertSentimentClassifier", "train", "test", "model_eval", "get_args"],
             "optimizer": ["AdamW.step"], "tokenizer": ["BertTokenizer"], "base_bert": ["BertPreTrainedModel"],
             "config": ["BertConfig"],
             "multitask_classifier": ["MultitaskBERT", "MultitaskBERT.forward", "MultitaskBERT.predict_sentiment",
                                      "MultitaskBERT.predict_paraphrase", "MultitaskBERT.predict_similarity",
                                      "train_multitask", "test_multitask", "get_args"],
             "evaluation": ["model_eval_multitask"],
             "datasets": ["SentenceClassificationDataset", "SentencePairDataset"]}
    for module, attrs in names.items():
        m = importlib.import_module(module)
        for attr in attrs:
            obj = m
            for part in attr.split("."):
                obj = getattr(obj, part)
            assert callable(obj), f"{module}.{attr}"


def test_no_library_module_imports_a_pipeline_script():
    scripts = {"classifier", "multitask_classifier", "pretrain"}
    for path in [*ROOT.glob("*.py"), *(ROOT / "tools").glob("*.py")]:
        tree = ast.parse(path.read_text())
        imported = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert not imported & scripts, f"{path.name} imports {sorted(imported & scripts)}"


def test_progress_lines_without_a_terminal(capsys, monkeypatch):
    import utils
    from utils import Progress
    clock = iter([100.0, 101.0, 130.0, 161.5])  # a scripted clock: the test does not depend on the machine's speed
    monkeypatch.setattr(utils.time, "perf_counter", lambda: next(clock))
    p = Progress("sst epoch 0", 10, every=60.0, terminal=False, first=0.0)
    p.update(2, tokens=1000, mean_loss=lambda: 1.5)  # 1 s in: the first line
    p.update(3, tokens=1500, mean_loss=lambda: 1.4)  # 29 s after it: within the minute, no second line
    p.update(5, tokens=2500, mean_loss=lambda: 1.3)  # 60.5 s after it: the next line
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0] == "sst epoch 0: step 2/10, loss 1.5000, 1000 tokens/s, 0m01s elapsed, about 0m04s left"
    assert lines[1].startswith("sst epoch 0: step 5/10, loss 1.3000, ") and "1m01s elapsed" in lines[1]
    monkeypatch.undo()
    Progress("x", 10, every=60.0, terminal=True, first=0.0).update(2)  # a terminal has tqdm's bar instead
    assert capsys.readouterr().out == ""


# ----------------------------------------------------------------------------- a run that diverges stops and says so

def test_a_diverging_run_stops_in_one_line_naming_nan(tmp_path, course_data, tiny_model):
    """--lr 1e6: the loss becomes NaN; the run stops at once (not after every epoch), says NaN and what to do,
    and its log says why it stopped (report.py reads that)."""
    import report
    from trainer import Diverged
    with pytest.raises(Diverged, match=r"mt epoch 0: the training loss became NaN by step \d+ of 4 \(peak learning "
                                       r"rate 1e\+06\): the weights diverged.*lower --lr"):
        mt.main(part2_args(tmp_path, course_data, tiny_model, "--epochs", "3", "--steps_per_epoch", "4", "--lr", "1e6"))
    log = [json.loads(l) for l in (tmp_path / "ck" / "mt-log.jsonl").read_text().splitlines()]
    assert len(log) == 1 and log[0]["epoch"] == 0 and "became NaN" in log[0]["stopped"]
    with pytest.raises(MinbertError, match=r"no epoch finished; the run stopped: the training loss became NaN"):
        report.main([str(tmp_path / "ck"), "--out", str(tmp_path / "rep")])


def test_a_nan_dev_score_stops_the_run(tmp_path, course_data, tiny_model, monkeypatch):
    """A model whose outputs are NaN scores NaN on STS (not a constant's r of 0): the run stops, naming it."""
    from multitask_classifier import MultitaskPipeline
    real = MultitaskPipeline.evaluate
    monkeypatch.setattr(MultitaskPipeline, "evaluate", lambda self: ({**real(self)[0], "sts": float("nan")}, float("nan")))
    with pytest.raises(MinbertError, match=r"mt epoch 0: the dev mean is NaN .*the weights diverged"):
        mt.main(part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "1"))
    import math
    from evaluation import pearson
    assert math.isnan(pearson([1.0, float("nan"), 2.0], [1.0, 2.0, 3.0])) and pearson([1.0, 1.0], [1.0, 2.0]) == 0.0


def test_under_fp16_a_non_finite_loss_is_left_to_the_grad_scaler():
    """fp16's grad scaler skips a step whose gradients overflow; only without it is a NaN loss divergence."""
    from optimizer import AdamW
    from trainer import Diverged, Trainer
    model = torch.nn.Linear(2, 2)
    t = Trainer(model, AdamW(model.parameters(), lr=1e-3), torch.device("cpu"))
    with pytest.raises(Diverged, match="became infinite by step 3 of 9"):
        t.check_finite(float("inf"), 3, 9)
    t.scaler = torch.amp.GradScaler("cpu", enabled=True)
    t.check_finite(float("nan"), 3, 9)


def test_resuming_with_the_data_moved_elsewhere_works_and_other_data_is_refused(tmp_path, course_data, tiny_model,
                                                                               monkeypatch, capsys):
    """The run records its inputs' sha256: the same bytes in another folder resume (one line says so); a file
    with other contents is refused, naming it."""
    import shutil
    common = ["--epochs", "2", "--steps_per_epoch", "2"]
    restore = interrupt_second_epoch(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        mt.main(part2_args(tmp_path, course_data, tiny_model, *common))
    restore()
    moved = tmp_path / "moved"
    shutil.copytree(course_data, moved)
    shutil.rmtree(course_data)
    (moved / "sts-train.csv").write_bytes((moved / "sts-train.csv").read_bytes() + b"\n")  # one more blank line
    with pytest.raises(MinbertError, match=r"cannot resume.*the --sts_train file .*moved/sts-train.csv holds other "
                                           r"contents than .*data/sts-train.csv"):
        mt.main(part2_args(tmp_path, moved, tiny_model, *common, "--resume"))
    (moved / "sts-train.csv").write_bytes((moved / "sts-train.csv").read_bytes()[:-1])
    capsys.readouterr()
    mt.main(part2_args(tmp_path, moved, tiny_model, *common, "--resume"))
    out = capsys.readouterr().out
    assert "resuming with input files that moved, their contents unchanged" in out and "resumed mt from" in out
