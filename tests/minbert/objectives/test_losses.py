"""losses.py by hand, and --sts_loss / --mnrl_weight / --simcse_weight / --siamese_proj in Part 2."""
import pytest
import torch
import torch.nn.functional as F

import multitask_classifier as mt
from minbert.flags.settings import multitask_settings, parse_multitask
from minbert.objectives.losses import ClassificationLoss, MultitaskLoss
from minbert.pipelines.multitask import MultitaskPipeline
from minbert.tasks.multitask import TaskOutput
from tests.course import part2_args


def test_every_embedding_option_end_to_end(tmp_path, course_data, tiny_model):
    args = part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--pair_encoding", "siamese",
                   "--sts_loss", "cosent", "--mnrl_weight", "0.5", "--simcse_weight", "0.1", "--siamese_proj", "16")
    trained = mt.main(args)
    saved = torch.load(tmp_path / "ck" / "mt.pt", weights_only=True)["model"]
    assert saved["proj.weight"].shape == (16, 32)
    rescored = mt.main(part2_args(tmp_path, course_data, tiny_model, "--eval_only", str(tmp_path / "ck" / "mt.pt")))
    assert rescored == pytest.approx(trained)  # the projection comes back from the checkpoint


@pytest.mark.parametrize("loss", ["cosine", "cosent"])
def test_similarity_losses_with_cross_pairs(tmp_path, course_data, tiny_model, loss):
    scores = mt.main(part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--sts_loss", loss))
    assert -1 <= scores["sts"] <= 1


class _Fixed(torch.nn.Module):
    """A stand-in for MultitaskBERT whose task_forward returns fixed outputs: the loss alone is under test."""

    def __init__(self, **outputs):
        super().__init__()
        self.outputs = outputs

    def task_forward(self, task, batch):
        return TaskOutput(**self.outputs[task])


def test_distillation_takes_each_examples_target_by_its_id_on_a_shuffled_batch():
    """The batch holds training examples 4, 0 and 2: the soft term must use those rows of the teacher's
    targets (not rows 0, 1, 2, the batch's positions), mixed with the gold loss as (1 - alpha) gold + alpha soft."""
    T, alpha = 2.0, 0.3
    g = torch.Generator().manual_seed(0)
    teacher = {"sst": torch.softmax(torch.randn(6, 5, generator=g), -1), "quora": torch.rand(6, generator=g)}
    z, logit = torch.randn(3, 5, generator=g), torch.randn(3, generator=g)
    model = _Fixed(sst={"output": z}, quora={"output": logit})
    loss = MultitaskLoss({"sst": 1.0, "quora": 1.0}, teacher=teacher, distill_weight=alpha, distill_temperature=T)
    index, gold = torch.tensor([4, 0, 2]), torch.tensor([1, 4, 0])
    p = teacher["sst"][index]
    soft = T * T * (p * (p.log() - torch.log_softmax(z / T, -1))).sum(-1).mean()
    by_hand = (1 - alpha) * F.cross_entropy(z, gold) + alpha * soft
    got = loss(model, {"task": "sst", "labels": gold, "index": index})
    assert got.item() == pytest.approx(by_hand.item(), rel=1e-5)
    q, s = teacher["quora"][index], torch.sigmoid(logit / T)
    soft = T * T * -(q * s.log() + (1 - q) * (1 - s).log()).mean()
    y = torch.tensor([1, 0, 1])
    by_hand = (1 - alpha) * F.binary_cross_entropy_with_logits(logit, y.float()) + alpha * soft
    assert loss(model, {"task": "quora", "labels": y, "index": index}).item() == pytest.approx(by_hand.item(), rel=1e-5)


@pytest.mark.parametrize("choice", ["mse", "cosine", "cosent"])
def test_each_sts_loss_flag_is_the_loss_the_step_computes(tmp_path, course_data, tiny_model, choice):
    """--sts_loss reaches Part 2's step: the loss built from the command line, on one STS batch, is the chosen
    formula by hand (MSE on the 0-5 output; (s - y/5)^2 on the score; CoSENT's ranking loss on the score)."""
    argv = part2_args(tmp_path, course_data, tiny_model, "--sts_loss", choice)
    pipeline = MultitaskPipeline(multitask_settings(parse_multitask(argv)))
    score = torch.tensor([0.9, 0.2, 0.6])
    y = torch.tensor([4.0, 3.0, 1.0])
    model = _Fixed(sts={"output": 5.0 * score, "score": score})
    pairs = [(i, j) for i in range(3) for j in range(3) if y[i] > y[j]]
    by_hand = {"mse": F.mse_loss(5.0 * score, y),
               "cosine": ((score - y / 5) ** 2).mean(),
               "cosent": torch.log(1 + sum(torch.exp(20 * (score[j] - score[i])) for i, j in pairs))}[choice]
    got = pipeline.loss(model, {"task": "sts", "labels": y, "index": torch.arange(3)})
    assert got.item() == pytest.approx(by_hand.item(), rel=1e-5)


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.3])
def test_label_smoothing_is_the_smoothed_target_by_hand_in_both_pipelines(tmp_path, course_data, tiny_model, eps):
    """--label_smoothing reaches the losses the steps compute: SST's (K = 5) cross entropy against
    (1 - eps) one-hot + eps / K, Quora's binary cross entropy against y (1 - eps) + eps / 2, in Part 2 from the
    command line; Part 1's loss takes the same rule; STS's regression is untouched."""
    g = torch.Generator().manual_seed(0)
    z, logit, score = torch.randn(4, 5, generator=g), torch.randn(4, generator=g), torch.rand(4, generator=g)
    sst, quora, sts = torch.tensor([1, 4, 0, 2]), torch.tensor([1, 0, 0, 1]), torch.tensor([4.0, 1.0, 2.5, 0.0])
    log_p = torch.log_softmax(z, -1)
    target = (1 - eps) * F.one_hot(sst, 5).float() + eps / 5
    sst_by_hand = -(target * log_p).sum(-1).mean()
    q = quora.float() * (1 - eps) + eps / 2
    quora_by_hand = -(q * F.logsigmoid(logit) + (1 - q) * F.logsigmoid(-logit)).mean()

    argv = part2_args(tmp_path, course_data, tiny_model, *(["--label_smoothing", str(eps)] if eps else []))
    settings = multitask_settings(parse_multitask(argv))
    assert settings.recipe.label_smoothing == eps
    loss = MultitaskPipeline(settings).loss
    model = _Fixed(sst={"output": z}, quora={"output": logit}, sts={"output": 5.0 * score, "score": score})
    index = torch.arange(4)
    assert loss(model, {"task": "sst", "labels": sst, "index": index}).item() == pytest.approx(sst_by_hand.item(),
                                                                                              rel=1e-5)
    assert loss(model, {"task": "quora", "labels": quora, "index": index}).item() == pytest.approx(
        quora_by_hand.item(), rel=1e-5)
    assert loss(model, {"task": "sts", "labels": sts, "index": index}).item() == pytest.approx(
        F.mse_loss(5.0 * score, sts).item(), rel=1e-5)

    class Logits(torch.nn.Module):
        def logits(self, batch):
            return z
    part1 = ClassificationLoss(eps)
    assert part1(Logits(), {"labels": sst}).item() == pytest.approx(sst_by_hand.item(), rel=1e-5)
    if eps == 0:  # off, the losses are the plain ones, bit for bit
        assert torch.equal(part1(Logits(), {"labels": sst}), F.cross_entropy(z, sst))


@pytest.mark.parametrize("value", ["1", "-0.1", "nan", "1e9"])
def test_label_smoothing_outside_zero_to_one_is_refused_in_one_line(value):
    from minbert.flags.settings import parse_classifier
    from utils import MinbertError
    with pytest.raises(MinbertError, match=rf"argument --label_smoothing: .*{value}.* (must be|is not) "):
        parse_classifier(["--label_smoothing", value])


def test_label_smoothing_reaches_part1s_loss(tmp_path, course_data, tiny_model):
    from minbert.flags.settings import classifier_settings, parse_classifier
    from minbert.pipelines.classifier import SentimentPipeline
    from tests.course import part1_args
    args = parse_classifier(part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst",
                                       "--label_smoothing", "0.2"))
    settings = classifier_settings(args, log=lambda *a: None)
    assert settings.recipe.label_smoothing == 0.2
    loss = SentimentPipeline(settings, "sst").loss
    assert isinstance(loss, ClassificationLoss) and loss.label_smoothing == 0.2
