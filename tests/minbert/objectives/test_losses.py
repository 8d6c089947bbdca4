"""losses.py by hand, and --sts_loss / --mnrl_weight / --simcse_weight / --siamese_proj in Part 2."""
import math
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import multitask_classifier as mt
from checkpoint import ModelSpec
from conftest import part2_args as mt_args, ROOT
from datasets import load_multitask_data
from losses import CoSENTLoss, CosineSimilarityLoss, MultipleNegativesRankingLoss, SimCSELoss
from multitask import MultitaskBERT, data_paths
from tokenizer import BertTokenizer


def test_mnrl_is_cross_entropy_over_a_3x3_score_matrix():
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    b = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    r = 1 / math.sqrt(2)
    cos = [[1, r, 0], [0, r, 1], [r, 1, r]]  # cos(a_i, b_j), by hand
    expected = 0.0
    for i in range(3):
        s = [20 * c for c in cos[i]]
        expected += -(s[i] - math.log(sum(math.exp(x) for x in s)))
    assert MultipleNegativesRankingLoss(20.0)(a, b).item() == pytest.approx(expected / 3, rel=1e-5)


def test_simcse_is_mnrl_at_one_over_tau():
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(4, 8, generator=g), torch.randn(4, 8, generator=g)
    assert SimCSELoss(0.05)(a, b).item() == pytest.approx(MultipleNegativesRankingLoss(20.0)(a, b).item())


def test_cosent_on_hand_made_scores():
    scores, gold = torch.tensor([0.9, 0.2, 0.5]), torch.tensor([5.0, 1.0, 3.0])
    # ordered pairs (i above j): (0,1), (0,2), (2,1): terms exp(20 (s_j - s_i))
    terms = [20 * (0.2 - 0.9), 20 * (0.5 - 0.9), 20 * (0.2 - 0.5)]
    expected = math.log(1 + sum(math.exp(t) for t in terms))
    assert CoSENTLoss()(scores, gold).item() == pytest.approx(expected, rel=1e-4)
    wrong = CoSENTLoss()(torch.tensor([0.2, 0.9, 0.5]), gold).item()
    assert wrong > 10 * expected  # the wrong order costs far more
    assert CoSENTLoss()(scores, torch.tensor([2.0, 2.0, 2.0])).item() == 0.0  # ties: nothing to order


def test_cosine_loss_on_hand_made_scores():
    loss = CosineSimilarityLoss()(torch.tensor([1.0, 0.0]), torch.tensor([5.0, 2.5]))
    assert loss.item() == pytest.approx((0.0 ** 2 + 0.5 ** 2) / 2)


def _model(tiny_model, dropout, pair_encoding="siamese", **kw):
    """A multitask model whose BERT dropout is `dropout` (heads: none)."""
    model = MultitaskBERT(ModelSpec(pretrained=str(tiny_model), pair_encoding=pair_encoding, dropout=[0.0] * 3, **kw))
    for m in model.bert.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = dropout
    return model


def test_simcse_passes_differ_only_by_dropout(tiny_model):
    ids = torch.randint(5, 40, (4, 9))
    mask = torch.ones_like(ids)
    model = _model(tiny_model, 0.1).train()
    a, b = model.embed_sentence(ids, mask), model.embed_sentence(ids, mask)
    assert not torch.allclose(a, b)  # two dropout masks
    torch.manual_seed(5)
    a = model.embed_sentence(ids, mask)
    torch.manual_seed(5)
    torch.testing.assert_close(model.embed_sentence(ids, mask), a, rtol=0, atol=0)  # same masks: same output
    model.eval()
    torch.testing.assert_close(model.embed_sentence(ids, mask), model.embed_sentence(ids, mask), rtol=0, atol=0)


def test_projection_feeds_cosine_and_pair_features(tiny_model):
    model = _model(tiny_model, 0.0, siamese_proj=6).eval()
    ids = torch.randint(5, 40, (3, 7))
    mask = torch.ones_like(ids)
    u, v = model.embed_sentence(ids, mask), model.embed_sentence(ids.flip(0), mask)
    assert u.shape == (3, 6) and model.para_head[-1].in_features == 24
    torch.testing.assert_close(model.predict_similarity(ids, mask, ids.flip(0), mask),
                               5 * F.relu(F.cosine_similarity(u, v, dim=-1)))


def test_every_embedding_option_end_to_end(tmp_path, course_data, tiny_model):
    args = mt_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--pair_encoding", "siamese",
                   "--sts_loss", "cosent", "--mnrl_weight", "0.5", "--simcse_weight", "0.1", "--siamese_proj", "16")
    trained = mt.main(args)
    saved = torch.load(tmp_path / "ck" / "mt.pt", weights_only=True)["model"]
    assert saved["proj.weight"].shape == (16, 32)
    rescored = mt.main(mt_args(tmp_path, course_data, tiny_model, "--eval_only", str(tmp_path / "ck" / "mt.pt")))
    assert rescored == pytest.approx(trained)  # the projection comes back from the checkpoint


@pytest.mark.parametrize("loss", ["cosine", "cosent"])
def test_similarity_losses_with_cross_pairs(tmp_path, course_data, tiny_model, loss):
    scores = mt.main(mt_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--sts_loss", loss))
    assert -1 <= scores["sts"] <= 1


def test_cross_pairs_refuse_embedding_losses_in_one_line(tmp_path, course_data, tiny_model):
    out = subprocess.run([sys.executable, "multitask_classifier.py",
                          *mt_args(tmp_path, course_data, tiny_model, "--mnrl_weight", "1")],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "--mnrl_weight works on sentence embeddings" in out.stderr and "--pair_encoding siamese (or mixed)" in out.stderr


def test_mixed_pairs_cross_encode_quora_and_embed_sts(tmp_path, course_data, tiny_model):
    model = _model(tiny_model, 0.0, pair_encoding="mixed", siamese_proj=6).eval()
    assert model.encoding == {"quora": "cross", "sts": "siamese"}
    assert model.para_head[-1].in_features == 32 and model.sts_head is None  # [CLS]-side head; cosine for STS
    ids = torch.randint(5, 40, (3, 7))
    mask = torch.ones_like(ids)
    u, v = model.embed_sentence(ids, mask), model.embed_sentence(ids.flip(0), mask)
    torch.testing.assert_close(model.predict_similarity(ids, mask, ids.flip(0), mask),
                               5 * F.relu(F.cosine_similarity(u, v, dim=-1)))
    assert model.predict_paraphrase(ids, mask, token_type_ids=torch.zeros_like(ids)).shape == (3,)
    # every embedding loss trains with it (MNRL and SimCSE only where there are sentence embeddings),
    # and --eval_only takes the encoding back from the checkpoint
    args = mt_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--pair_encoding", "mixed", "--sts_loss", "cosent",
                   "--mnrl_weight", "0.5", "--simcse_weight", "0.1", "--siamese_proj", "16")
    trained = mt.main(args)
    rescored = mt.main(mt_args(tmp_path, course_data, tiny_model, "--eval_only", str(tmp_path / "ck" / "mt.pt")))
    assert rescored == pytest.approx(trained)
    a = mt.get_args(args)
    data = load_multitask_data(data_paths(a), BertTokenizer.from_pretrained(a.pretrained), a.max_length,
                               a.pair_encoding, ["dev"])["dev"]
    assert set(data["quora"].inputs) == {"x"} and set(data["sts"].inputs) == {"a", "b"}


def test_grad_norms_tool_measures_each_task(tmp_path, course_data, tiny_model, capsys):
    sys.path.insert(0, str(ROOT / "tools"))
    import grad_norms
    args = mt.get_args(mt_args(tmp_path, course_data, tiny_model, "--pair_encoding", "siamese", "--loss_weights", "1", "1", "0"))
    norms = grad_norms.grad_norms(args, batches=2)
    assert set(norms) == {"sst", "quora", "sts"}
    assert norms["sst"][1] > 0 and norms["quora"][1] > 0 and norms["sts"] == (0.0, 0.0)  # weight 0: no pull
    grad_norms.main(mt_args(tmp_path, course_data, tiny_model, "--sts_loss", "cosent"))
    assert capsys.readouterr().out.count("encoder gradient norm") == 3
