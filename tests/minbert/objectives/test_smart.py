"""objectives/smart.py: SMART's adversarial term measures smoothness (not dropout) and grows with the ascent step,
which goes up the gradient; the Bregman step's teacher is the model at step 0 and follows the EMA rule; the
divergences by hand."""
import pytest
import torch

from minbert.objectives.losses import ClassificationLoss
from minbert.objectives.smart import BregmanProximal, SmartRegularizer, divergence, dropout_off, symmetric_kl
from tests.checkpoints import sentiment_batch, sentiment_model


def _smart(model, seed=0, **kw):
    torch.manual_seed(seed)
    batch = sentiment_batch()
    run = lambda: model.logits(batch)  # noqa: E731
    return SmartRegularizer(1.0, **kw)(model, model.bert, run, run(), "multiclass")


def test_the_default_smart_term_measures_smoothness_and_grows_with_the_ascent_step(tiny_model):
    model = sentiment_model(tiny_model, 0.3)  # dropout on, as in training
    term = _smart(model)  # the defaults: reference perturbation, dropout off in the perturbed passes
    assert term.item() > 1e-6
    assert model.training and all(m.training for m in model.modules())  # each module's mode is put back
    assert model.bert.perturb is None  # the hook is removed after use
    assert _smart(model, step_size=0.0, noise_std=0.0).item() == 0.0  # no perturbation: nothing, dropout or not
    # more ascent (the gradient outweighs the initial noise) finds a worse neighbour than the noise's direction
    assert _smart(model, step_size=1e3).item() > _smart(model, step_size=0.0).item()
    model.zero_grad()
    term.backward()
    g = model.bert.word_embedding.weight.grad
    assert g is not None and g.abs().sum() > 0  # the term's gradient reaches the embeddings


def test_the_reference_perturbation_ends_near_infinity_norm_1_per_token(tiny_model):
    """sigma 1e-5 noise over 384 coordinates: a token's largest is about 3e-5, which the 1e-6 guard in the division
    barely shrinks; the ascent step only turns the direction."""
    torch.manual_seed(0)
    out = SmartRegularizer(1.0).ascend(torch.randn(2, 5, 384) * 1e-5, torch.randn(2, 5, 384) * 1e-6)
    norms = out.abs().amax(-1)
    assert ((norms > 0.9) & (norms < 1.0)).all()


def test_each_projection_steps_up_the_gradient():
    """An ascent step moves the perturbation along the gradient of l_s, not against it: the ball's step is the
    gradient normalised per token (largest coordinate 1) times the step size, inside the ball; the reference's
    ends in the gradient's direction once the step outweighs the starting noise."""
    torch.manual_seed(0)
    grad = torch.randn(2, 5, 8)
    ball = SmartRegularizer(1.0, projection="ball", eps=1e-3, step_size=1e-4).ascend(torch.zeros(2, 5, 8), grad)
    torch.testing.assert_close(ball, 1e-4 * grad / grad.abs().amax(-1, keepdim=True))
    reference = SmartRegularizer(1.0, step_size=1e3).ascend(torch.randn(2, 5, 8) * 1e-5, grad)
    torch.testing.assert_close(reference, grad / grad.abs().amax(-1, keepdim=True), rtol=1e-4, atol=1e-4)


def test_the_paper_projection_stays_in_the_eps_ball(tiny_model):
    reg = SmartRegularizer(1.0, projection="ball", eps=1e-3, step_size=1.0)
    out = reg.ascend(torch.zeros(2, 5, 8), torch.randn(2, 5, 8))
    assert out.abs().max().item() == pytest.approx(1e-3)
    model = sentiment_model(tiny_model, 0.0)
    assert _smart(model, projection="ball", eps=0.0).item() == pytest.approx(0.0, abs=1e-12)
    assert _smart(model, projection="ball", eps=0.5, step_size=0.5, steps=2).item() > 1e-6


def test_with_smart_dropout_the_term_holds_the_dropout_difference(tiny_model):
    model = sentiment_model(tiny_model, 0.3)
    assert _smart(model, step_size=0.0, noise_std=0.0, keep_dropout=True).item() > 1e-4  # R-Drop's part


def test_bregman_is_zero_at_step_0_and_its_teacher_follows_the_ema_rule(tiny_model):
    model = sentiment_model(tiny_model, 0.0)
    loss = ClassificationLoss(bregman=BregmanProximal(model, weight=1.0))
    loss(model, sentiment_batch())
    assert loss.pop_terms()["bregman"] == pytest.approx(0.0, abs=1e-10)  # the teacher is the model
    lin = torch.nn.Linear(2, 1)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, 2.0]]))
        lin.bias.fill_(0.0)
    breg = BregmanProximal(lin, momentum=0.9)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[3.0, -2.0]]))
        lin.bias.fill_(1.0)
    breg.after_step()  # theta~ = 0.9 theta~ + 0.1 theta
    teacher_w, teacher_b = breg.teacher()
    torch.testing.assert_close(teacher_w, torch.tensor([[1.2, 1.6]]))
    torch.testing.assert_close(teacher_b, torch.tensor([0.1]))
    with breg.as_teacher():  # the model runs with the teacher's values, then gets its own back
        torch.testing.assert_close(lin.weight, torch.tensor([[1.2, 1.6]]))
    torch.testing.assert_close(lin.weight, torch.tensor([[3.0, -2.0]]))
    paper = BregmanProximal(lin, total_steps=100)  # the paper's schedule: 0.99 for 10% of the updates, then 0.999
    betas = []
    for _ in range(12):
        betas.append(float(paper.beta()))
        paper.after_step()
    assert betas == pytest.approx([0.99] * 10 + [0.999, 0.999])  # read on the device, in fp32
    assert set(paper.state_dict()) == {"teacher_0", "teacher_1", "updates"}  # saved with the loss for --resume


def test_on_the_papers_schedule_the_teacher_moves_by_one_minus_beta():
    """theta~ <- beta theta~ + (1 - beta) theta with beta 0.99 for the first 10% of the updates and 0.999 after:
    the teacher moves a hundredth, then a thousandth, of the way to the model."""
    lin = torch.nn.Linear(2, 1)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.0, 2.0]]))
        lin.bias.fill_(0.0)
    breg = BregmanProximal(lin, total_steps=10)  # beta 0.99 for the first update, 0.999 after
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[101.0, 2.0]]))
        lin.bias.fill_(1000.0)
    breg.after_step()
    torch.testing.assert_close(breg.teacher()[0], torch.tensor([[2.0, 2.0]]))  # 1 + 0.01 (101 - 1)
    torch.testing.assert_close(breg.teacher()[1], torch.tensor([10.0]))
    breg.after_step()
    torch.testing.assert_close(breg.teacher()[0], torch.tensor([[2.099, 2.0]]))  # 2 + 0.001 (101 - 2)
    torch.testing.assert_close(breg.teacher()[1], torch.tensor([10.99]))


def test_dropout_off_puts_each_modules_mode_back():
    m = torch.nn.Sequential(torch.nn.Dropout(0.5), torch.nn.Dropout(0.5)).train()
    m[1].eval()
    with dropout_off(m):
        assert not any(x.training for x in m.modules())
    assert [x.training for x in m] == [True, False]


def test_divergences():
    p, q = torch.tensor([[2.0, 0.0, -1.0]]), torch.tensor([[0.0, 1.0, 0.5]])
    P, Q = p.softmax(-1), q.softmax(-1)
    expected = (P * (P / Q).log()).sum() + (Q * (Q / P).log()).sum()
    assert symmetric_kl(p, q).item() == pytest.approx(expected.item(), rel=1e-5)
    zp, zq = torch.tensor([1.5]), torch.tensor([-0.5])
    a, b = torch.sigmoid(zp), torch.sigmoid(zq)
    bern = a * (a / b).log() + (1 - a) * ((1 - a) / (1 - b)).log() + b * (b / a).log() + (1 - b) * ((1 - b) / (1 - a)).log()
    assert divergence(zp, zq, "binary").item() == pytest.approx(bern.item(), rel=1e-5)
    assert divergence(torch.tensor([1.0, 3.0]), torch.tensor([2.0, 1.0]), "regression").item() == pytest.approx(2.5)


def test_the_teachers_pass_under_autocast_runs_the_teachers_weights():
    """Autocast keeps the training pass's bf16 weights cached by parameter; the teacher's pass (the parameters
    holding the teacher's values) must not reuse them, or the proximal term compares the model with itself."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(4, 1)
    breg = BregmanProximal(lin, momentum=0.5)
    with torch.no_grad():
        lin.weight.add_(1.0)  # the student moves away from the teacher (its starting copy)
    x = torch.randn(6, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = lin(x).squeeze(-1)  # the training pass: the student's weights cast and cached
        term = breg(lin, lambda: lin(x).squeeze(-1), out, "regression")
    exact = breg(lin, lambda: lin(x).squeeze(-1), lin(x).squeeze(-1), "regression")  # fp32, no cache
    assert float(term.detach()) > 0.5 * float(exact.detach()) > 0


def test_the_update_count_lives_where_the_teacher_does():
    """Counted on the model's device, so that a step recorded as a CUDA graph counts every replay."""
    lin = torch.nn.Linear(4, 1, device="meta")
    breg = BregmanProximal(lin)
    assert breg.updates.device.type == "meta" and breg.teacher()[0].device.type == "meta"
