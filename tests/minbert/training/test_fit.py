"""training/fit.py, the epoch protocol: resumed runs equal uninterrupted ones, early stopping keeps the best
epoch, every pipeline logs one schema, and a diverging run stops in one line."""
import json
import re

import pytest
import torch

import classifier
import multitask_classifier as mt
from minbert.pipelines import multitask as part2
from minbert.runs.folders import Run
from minbert.specs import RunSpec
from minbert.training.fit import EarlyStopping, resume_command
from tests.course import output_files, part1_args, part2_args
from tests.processes import DEVICES, device_flags, epochs_run, interrupt_second_epoch
from utils import MinbertError


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


@pytest.mark.parametrize("spec, said", [
    (RunSpec(), "the same command plus --resume --run_name r"),  # a new timestamped folder: named for the resume
    (RunSpec(name="r"), "the same command plus --resume"),
    (RunSpec(dir="ck"), "the same command plus --resume"),
    (RunSpec(resume=True), "the same command plus --run_name r"),  # --resume alone took the newest run
    (RunSpec(name="r", resume=True), "the same command"),
])
def test_the_resume_command_adds_only_what_the_command_lacks(spec, said):
    """A flag typed twice is refused, so the printed command never asks for a flag the command has already."""
    assert resume_command(spec, Run("r", None, "--run_name r")) == said


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
    tie = EarlyStopping(patience=2)
    assert tie.update(0.6, 0) and not tie.update(0.6, 1)  # a tie is no improvement: the earlier epoch stays best
    assert (tie.best_epoch, tie.waited) == (0, 1)


def test_resuming_a_finished_run_neither_trains_nor_scores_it_again(tmp_path, course_data, tiny_model, monkeypatch,
                                                                    capsys):
    import classifier
    from minbert.training import fit as fit_module
    args = part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst", "--epochs", "2")
    classifier.main(args)
    names, finished = epochs_run(monkeypatch), []
    real = fit_module.finish
    monkeypatch.setattr(fit_module, "finish", lambda *a, **kw: finished.append(1) or real(*a, **kw))
    classifier.main(args + ["--resume"])
    assert names == [] and finished == []


def test_multitask_stops_early_and_keeps_the_best_epoch(tmp_path, course_data, tiny_model, monkeypatch, capsys):
    script = iter([0.5, 0.7, 0.6, 0.65, 0.9, 0.9])
    real = part2.model_eval_multitask

    def scripted(model, data, *a, **kw):
        scores, preds = real(model, data, *a, **kw)
        if "raw" in kw:  # the final scoring, for the files: real scores
            return scores, preds
        m = next(script)
        return {"sst": m, "quora": m, "sts": 2 * m - 1}, preds
    monkeypatch.setattr(part2, "model_eval_multitask", scripted)
    ck = tmp_path / "ck" / "mt.pt"
    outs = [f"--{t}_{s}_out={tmp_path / f'{t}-{s}-output.csv'}" for t in ("sst", "para", "sts") for s in ("dev", "test")]
    mt.main(["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--epochs", "6", "--batch_size", "8",
             "--patience", "2", "--checkpoint", str(ck), "--results", str(tmp_path / "r.csv"), *outs])
    out = capsys.readouterr().out
    assert "stopping early: the dev mean has not improved for 2 epoch(s) since epoch 1" in out
    log = [json.loads(l) for l in (ck.parent / "mt-log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log if "stopped" not in r] == [0, 1, 2, 3] and "stopped" in log[-1]
    assert torch.load(ck, weights_only=True)["epoch"] == 1


def test_a_resumed_run_stops_early_where_the_straight_one_does_and_a_stopped_run_trains_no_more(
        tmp_path, course_data, tiny_model, monkeypatch, capsys):
    """Dev means 0.7, 0.6, 0.65 with --patience 2: the run stops after epoch 2. Interrupted after epoch 0 and
    resumed, it must remember that epoch 0 is the best (else 0.6 and 0.65 count as gains and it trains on);
    resumed once more, the stopped run trains nothing and writes no further log line."""
    script = []
    real = part2.model_eval_multitask

    def scripted(model, data, *a, **kw):
        scores, preds = real(model, data, *a, **kw)
        if "raw" in kw:
            return scores, preds
        m = script.pop(0)
        return {"sst": m, "quora": m, "sts": 2 * m - 1}, preds
    monkeypatch.setattr(part2, "model_eval_multitask", scripted)
    common = ("--epochs", "6", "--steps_per_epoch", "2", "--patience", "2")
    script[:] = [0.7, 0.6, 0.65, 0.9, 0.9, 0.9]
    mt.main(part2_args(tmp_path / "straight", course_data, tiny_model, *common))
    restore = interrupt_second_epoch(monkeypatch)
    script[:] = [0.7]
    with pytest.raises(KeyboardInterrupt):
        mt.main(part2_args(tmp_path / "resumed", course_data, tiny_model, *common))
    restore()
    trained = epochs_run(monkeypatch)
    script[:] = [0.6, 0.65, 0.9, 0.9, 0.9]
    mt.main(part2_args(tmp_path / "resumed", course_data, tiny_model, *common, "--resume"))
    assert trained == ["mt epoch 1", "mt epoch 2"]
    log_file = tmp_path / "resumed" / "ck" / "mt-log.jsonl"
    for run in ("straight", "resumed"):
        log = [json.loads(l) for l in (tmp_path / run / "ck" / "mt-log.jsonl").read_text().splitlines()]
        assert [r["epoch"] for r in log if "stopped" not in r] == [0, 1, 2]
    assert output_files(tmp_path / "resumed" / "pred") == output_files(tmp_path / "straight" / "pred")
    before = log_file.read_text()
    trained.clear()
    mt.main(part2_args(tmp_path / "resumed", course_data, tiny_model, *common, "--resume"))
    assert trained == [] and log_file.read_text() == before
    assert output_files(tmp_path / "resumed" / "pred") == output_files(tmp_path / "straight" / "pred")


@pytest.mark.parametrize("extra", [[], ["--rdrop_weight", "1", "--smart_bregman_weight", "1", "--pair_encoding", "mixed"],
                                   ["--sampler", "all", "--pcgrad"], ["--sampler", "all", "--gradvac"],
                                   ["--gradual_unfreeze", "3", "--optimizer", "lamb", "--shared_head", "8"]])
@pytest.mark.parametrize("device", DEVICES)
def test_part2_resumed_after_an_interruption_equals_an_uninterrupted_run(tmp_path, course_data, tiny_model,
                                                                          monkeypatch, extra, device):
    """The model, optimizer, schedule, random states (the GPU's too), each task stream's place, early stopping, the
    Bregman teacher, GradVac's averages and the unfreezing schedule's step all come back: the six files are the
    same."""
    common = ["--epochs", "3", "--steps_per_epoch", "4", "--patience", "5", *extra, *device_flags(device)]
    straight = mt.main(part2_args(tmp_path / "straight", course_data, tiny_model, *common))
    restore = interrupt_second_epoch(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        mt.main(part2_args(tmp_path / "resumed", course_data, tiny_model, *common))
    restore()
    last = torch.load(tmp_path / "resumed" / "ck" / "mt-last.pt", weights_only=True)
    assert last["epoch"] == 0 and set(last["pipeline_state"]) == {"sst", "quora", "sts"}
    resumed = mt.main(part2_args(tmp_path / "resumed", course_data, tiny_model, *common, "--resume"))
    assert resumed == pytest.approx(straight, abs=1e-6)
    assert output_files(tmp_path / "resumed" / "pred") == output_files(tmp_path / "straight" / "pred")
    # the loss's own state came back too: the Bregman teacher and its update count are the straight run's
    ends = [torch.load(tmp_path / run / "ck" / "mt-last.pt", weights_only=True) for run in ("straight", "resumed")]
    assert ends[0]["loss_state"].keys() == ends[1]["loss_state"].keys()
    for k, v in ends[0]["loss_state"].items():
        torch.testing.assert_close(ends[1]["loss_state"][k], v, rtol=1e-5, atol=1e-7)
    log = [json.loads(l) for l in (tmp_path / "resumed" / "ck" / "mt-log.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in log] == [0, 1, 2]  # no epoch twice
    with pytest.raises(MinbertError, match=r"cannot resume, the checkpoint comes from another configuration: --lr"):
        mt.main(part2_args(tmp_path / "resumed", course_data, tiny_model, *common, "--resume", "--lr", "3e-3"))


def test_every_pipeline_logs_one_schema(tmp_path, course_data, tiny_model, capsys):
    import classifier
    import pretrain
    classifier.main(part1_args(tmp_path / "p1", course_data, tiny_model, "--datasets", "sst", "--epochs", "1"))
    capsys.readouterr()
    mt.main(part2_args(tmp_path / "p2", course_data, tiny_model, "--epochs", "1"))
    # the line that says where the run's time went, each part timed
    line = next(l for l in capsys.readouterr().out.splitlines() if "of epochs and outputs went" in l)
    parts = dict(re.findall(r"(training|dev evaluation|checkpoints|final outputs) ([0-9.]+)s", line))
    assert line.startswith("mt: where this run's ") and set(parts) == {"training", "dev evaluation", "checkpoints",
                                                                     "final outputs"}
    assert float(line.split("run's ")[1].split("s ")[0]) == pytest.approx(sum(map(float, parts.values())), abs=0.15)
    texts = tmp_path / "texts.txt"
    # 100 different lines (repeated ones would count once), 5 held out: enough tokens that some are masked
    texts.write_text("".join(f"the movie {i} was good and the film {i} was bad\n" for i in range(100)))
    pretrain.main(["--pretrained", str(tiny_model), "--texts", str(texts), "--out", str(tmp_path / "mlm"),
                   "--epochs", "1", "--batch_size", "8", "--max_length", "16"])
    logs = {"classifier": tmp_path / "p1" / "ck" / "last-linear-layer-sst-log.jsonl",
            "multitask": tmp_path / "p2" / "ck" / "mt-log.jsonl", "pretrain": tmp_path / "mlm" / "pretrain-log.jsonl"}
    keys = {"run", "pipeline", "model", "epoch", "train_loss", "loss_terms", "dev", "dev_score", "score_name", "best",
            "seconds", "tokens_per_s", "lr", "steps", "dev_seconds"}
    for pipeline, path in logs.items():
        record = [json.loads(l) for l in path.read_text().splitlines()][-1]
        assert keys <= set(record) and record["pipeline"] == pipeline, (pipeline, sorted(record))
    import report  # reads all three, one figure of curves per pipeline
    md, figs = report.report(list(logs.values()), tmp_path / "report")
    assert {p.name for p in figs} >= {"curves-classifier.png", "curves-multitask.png", "curves-pretrain.png"}


def test_a_diverging_run_stops_in_one_line_naming_nan(tmp_path, course_data, tiny_model):
    """--lr 1e6: the loss becomes NaN; the run stops at once (not after every epoch), says NaN and what to do,
    and its log says why it stopped (report.py reads that)."""
    import report
    from minbert.training.trainer import Diverged
    with pytest.raises(Diverged, match=r"mt epoch 0: the training loss became NaN by step \d+ of 4 \(peak learning "
                                       r"rate 1e\+06\): the weights diverged.*lower --lr"):
        mt.main(part2_args(tmp_path, course_data, tiny_model, "--epochs", "3", "--steps_per_epoch", "4", "--lr", "1e6"))
    log = [json.loads(l) for l in (tmp_path / "ck" / "mt-log.jsonl").read_text().splitlines()]
    assert len(log) == 1 and log[0]["epoch"] == 0 and "became NaN" in log[0]["stopped"]
    with pytest.raises(MinbertError, match=r"no epoch finished; the run stopped: the training loss became NaN"):
        report.main([str(tmp_path / "ck"), "--out", str(tmp_path / "rep")])


def test_a_nan_dev_score_stops_the_run(tmp_path, course_data, tiny_model, monkeypatch):
    """A model whose outputs are NaN scores NaN on STS (not a constant's r of 0): the run stops, naming it."""
    from minbert.pipelines.multitask import MultitaskPipeline
    real = MultitaskPipeline.evaluate
    monkeypatch.setattr(MultitaskPipeline, "evaluate", lambda self: ({**real(self)[0], "sts": float("nan")}, float("nan")))
    with pytest.raises(MinbertError, match=r"mt epoch 0: the dev mean is NaN .*the weights diverged"):
        mt.main(part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "1"))
    import math
    from evaluation import pearson
    assert math.isnan(pearson([1.0, float("nan"), 2.0], [1.0, 2.0, 3.0])) and pearson([1.0, 1.0], [1.0, 2.0]) == 0.0


def test_early_stopping_waits_exactly_patience_epochs_and_a_resumed_run_keeps_counting():
    """Each boundary from both sides: a tie is no improvement, the run stops at the patience-th epoch without one
    (not before, not after), 0 never stops, and a resumed run goes on counting from where it stopped."""
    stopper = EarlyStopping(2)
    assert stopper.update(0.5, 0) and not stopper.should_stop
    assert not stopper.update(0.5, 1) and not stopper.should_stop  # one epoch without improvement
    assert not stopper.update(0.4, 2) and stopper.should_stop  # two: stop here
    assert stopper.reason() == ("stopping early: the dev score has not improved for 2 epoch(s) since epoch 0 "
                                "(0.5000), --patience 2")
    resumed = EarlyStopping(2)
    resumed.load_state_dict(EarlyStopping(2, best=0.5, best_epoch=0, waited=1).state_dict())
    assert not resumed.update(0.49, 2) and resumed.should_stop and resumed.best_epoch == 0
    again = EarlyStopping(2, best=0.5, best_epoch=0, waited=1)
    assert again.update(0.51, 2) and not again.should_stop and again.waited == 0
    assert not EarlyStopping(0, best=0.5, best_epoch=0, waited=99).should_stop


def test_a_diverged_run_is_advised_in_the_flags_its_own_script_takes():
    """Part 2 names --loss_weights, Part 1 and Build GPT-2's classifiers a regulariser's weight, pretrain.py (which
    clips at 1 already and weighs no loss) --lr alone; clipping is advised only where the run does not clip; every
    flag named is one the script parses."""
    import re
    from types import SimpleNamespace
    from gpt2.paraphrase import GPT2ParaphrasePipeline
    from gpt2.sentiment import GPT2SentimentPipeline
    from gpt2.sonnet_pipeline import SonnetPipeline
    from minbert.flags.parsers import defaults, parser
    from minbert.pipelines.classifier import SentimentPipeline
    from minbert.pipelines.multitask import MultitaskPipeline
    from minbert.pipelines.pretrain import PretrainPipeline

    def advice(cls, clip):
        pipeline = object.__new__(cls)  # (only its settings' clipping is read)
        pipeline.settings = SimpleNamespace(recipe=SimpleNamespace(max_grad_norm=clip))
        return pipeline.steadier()
    assert advice(MultitaskPipeline, 0.0) == ("lower --lr (or a weight that scales the loss: --loss_weights, a "
                                              "regulariser's), or add --max_grad_norm 1.0")
    assert advice(MultitaskPipeline, 0.5) == "lower --lr (or a weight that scales the loss: --loss_weights, a regulariser's)"
    assert advice(SentimentPipeline, 0.0) == "lower --lr (or a regulariser's weight), or add --max_grad_norm 1.0"
    assert advice(PretrainPipeline, 1.0) == "lower --lr"
    assert advice(SonnetPipeline, 0.0) == "lower --lr, or add --max_grad_norm 1.0"
    for cls, script in ((MultitaskPipeline, "multitask"), (SentimentPipeline, "classifier"),
                        (PretrainPipeline, "pretrain"), (GPT2SentimentPipeline, "gpt2-classifier"),
                        (GPT2ParaphrasePipeline, "gpt2-paraphrase"), (SonnetPipeline, "gpt2-sonnet")):
        ap = parser(script)
        clip = ap.get_default("max_grad_norm")  # the script's default (pretrain.py's, which it does not parse: 1)
        clip = defaults(script)["max_grad_norm"] if clip is None else clip
        assert set(re.findall(r"--\w+", advice(cls, clip))) <= set(ap._option_string_actions), script
