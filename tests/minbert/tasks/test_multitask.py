"""tasks/multitask.py: MultitaskBERT's heads (siamese and cross-encoded pairs, the projection, a shared head
layer), the handout's two-sentence calls scoring a pair as training does, SimCSE's two passes differing by
dropout alone, and a checkpoint refused where the typed architecture contradicts it."""

import pytest
import torch
import torch.nn.functional as F

import multitask_classifier as mt
from datasets import load_multitask_data
from minbert.flags.settings import multitask_settings
from minbert.specs import ModelSpec
from minbert.tasks.multitask import MultitaskBERT
from tests.course import part2_args
from tests.processes import run_main
from tokenizer import BertTokenizer


def test_eval_only_with_contradicting_flags_names_them(tmp_path, course_data, tiny_model):
    mt.main(part2_args(tmp_path, course_data, tiny_model, "--epochs", "1"))
    out = run_main("multitask_classifier.py",
                   *part2_args(tmp_path, course_data, tiny_model, "--pair_encoding", "siamese", "--pooling", "mean",
                               "--eval_only", str(tmp_path / "ck" / "mt.pt")))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "another configuration: --pair_encoding 'cross' in the checkpoint, 'siamese' given" in out.stderr
    assert "--pooling" not in out.stderr  # same value: not a difference


def test_siamese_heads(tiny_model):
    from minbert.specs import ModelSpec
    m = mt.MultitaskBERT(ModelSpec(pretrained=str(tiny_model), pair_encoding="siamese", dropout=[0.0] * 3)).eval()
    a = torch.tensor([[2, 7, 9, 3, 0], [2, 10, 11, 12, 3]])
    b = torch.tensor([[2, 7, 9, 3], [2, 20, 21, 3]])
    ma, mb = (a != 0).long(), (b != 0).long()
    with torch.no_grad():
        u, v = m(a, ma), m(b, mb)  # forward: the sentence embeddings (mean pooling)
        sim = m.predict_similarity(a, ma, b, mb)
    torch.testing.assert_close(sim, 5 * torch.relu(torch.cosine_similarity(u, v)))
    assert sim[0].item() == pytest.approx(5.0, abs=1e-4)  # the same sentence, padded differently
    assert m.predict_paraphrase(a, ma, b, mb).shape == (2,)
    with pytest.raises(ValueError, match="needs both sentences"):
        m.predict_paraphrase(a, ma)


@pytest.mark.parametrize("encoding", ["cross", "siamese", "mixed"])
def test_the_handouts_two_sentence_calls_score_pairs_as_training_does(course_data, tiny_model, encoding):
    """model_eval_multitask in the handout gives predict_paraphrase / predict_similarity the two sentences
    tokenized apart (each padded); under every encoding that equals the pair as training builds it. A
    cross-encoder joins two whole sentences and cuts the pair to the model's --max_length as the tokenizer
    does; siamese sentences are taken as given, so they come at that length."""
    from datasets import TaskData
    from minbert.course_data import read_examples
    model = _model(tiny_model, 0.0, pair_encoding=encoding, max_length=12).eval()
    tok = BertTokenizer.from_pretrained(str(tiny_model))
    for task, call in (("quora", model.predict_paraphrase), ("sts", model.predict_similarity)):
        rows = read_examples(course_data / f"{task}-dev.csv", task, "dev")
        trained = TaskData(rows, task, tok, 12, model.encoding[task]).batch(range(len(rows)))
        cross = model.encoding[task] == "cross"
        apart = TaskData(rows, task, tok, 512 if cross else 12, "siamese").batch(range(len(rows)))
        a, b = apart["a"], apart["b"]
        assert (a["attention_mask"].sum(1) + b["attention_mask"].sum(1) - 1 > 12).any()  # some pairs are cut
        with torch.no_grad():
            two = call(a["input_ids"], a["attention_mask"], b["input_ids"], b["attention_mask"])
            torch.testing.assert_close(two, model.task_forward(task, trained).output, rtol=0, atol=1e-6)
        if cross:  # the pair given as one input, as before, is the same call
            x = trained["x"]
            one = call(x["input_ids"], x["attention_mask"], token_type_ids=x["token_type_ids"])
            torch.testing.assert_close(one, model.task_forward(task, trained).output, rtol=0, atol=0)


def test_a_cross_encoder_refuses_sentences_without_their_special_tokens(tiny_model):
    model = _model(tiny_model, 0.0, pair_encoding="cross").eval()
    a = torch.tensor([[2, 7, 9, 3, 0], [2, 10, 11, 12, 3]])
    b = torch.tensor([[7, 9], [20, 21]])  # tokenized without [CLS] and [SEP]
    with pytest.raises(ValueError, match=r"row 0: .*must each be tokenized with its special tokens"):
        model.predict_paraphrase(a, (a != 0).long(), b, torch.ones_like(b))


def test_a_shared_head_layer_is_trained_by_every_task_and_each_keeps_its_output(tiny_model):
    from minbert.specs import ModelSpec
    from utils import MinbertError
    model = mt.MultitaskBERT(ModelSpec(pretrained=str(tiny_model), shared_head=8, dropout=[0.0] * 3))
    assert model.sst_head[-1].in_features == model.para_head[-1].in_features == model.sts_head[-1].in_features == 8
    ids = torch.tensor([[2, 7, 8, 3, 9, 10, 3]])
    mask, types = torch.ones_like(ids), torch.tensor([[0, 0, 0, 0, 1, 1, 1]])
    for task, out in (("sst", lambda: model.predict_sentiment(ids, mask)),
                      ("quora", lambda: model.predict_paraphrase(ids, mask, token_type_ids=types)),
                      ("sts", lambda: model.predict_similarity(ids, mask, token_type_ids=types))):
        model.zero_grad(set_to_none=True)
        out().sum().backward()
        with_grad = {n.split(".")[0] for n, p in model.named_parameters() if p.grad is not None}
        assert "shared" in with_grad and {"sst": "sst_head", "quora": "para_head", "sts": "sts_head"}[task] in with_grad
        assert len(with_grad & {"sst_head", "para_head", "sts_head"}) == 1  # the other tasks' outputs are untouched
    with pytest.raises(MinbertError, match="--shared_head shares a hidden layer .* with --pair_encoding siamese"):
        mt.get_args(["--shared_head", "8", "--pair_encoding", "siamese"])


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
    args = part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--pair_encoding", "mixed", "--sts_loss", "cosent",
                   "--mnrl_weight", "0.5", "--simcse_weight", "0.1", "--siamese_proj", "16")
    trained = mt.main(args)
    rescored = mt.main(part2_args(tmp_path, course_data, tiny_model, "--eval_only", str(tmp_path / "ck" / "mt.pt")))
    assert rescored == pytest.approx(trained)
    s = multitask_settings(mt.get_args(args), log=lambda *_: None)
    data = load_multitask_data(s.data.paths, BertTokenizer.from_pretrained(s.model.pretrained), s.model.max_length,
                               s.model.pair_encoding, ["dev"])["dev"]
    assert set(data["quora"].inputs) == {"x"} and set(data["sts"].inputs) == {"a", "b"}


def test_siamese_scores_come_from_the_two_embeddings(tiny_model, monkeypatch):
    """Similarity 5 ReLU(cos(u, v)): opposed sentences score 0, not below; paraphrase reads [u, v, |u - v|, u * v]."""
    model = _model(tiny_model, 0.0).eval()
    a, b = torch.tensor([[2, 7, 3]]), torch.tensor([[2, 9, 3]])
    ones = torch.ones_like(a)
    u = torch.randn(1, model.bert.config.hidden_size)
    v = -0.5 * u
    monkeypatch.setattr(model, "embed_sentence", lambda ids, mask: u if ids is a else v)
    assert model.predict_similarity(a, ones, b, ones).tolist() == [0.0]  # cos(u, v) = -1
    seen = []
    model.para_head.register_forward_hook(lambda module, inputs, output: seen.append(inputs[0]))
    model.predict_paraphrase(a, ones, b, ones)
    torch.testing.assert_close(seen[0], torch.cat([u, v, (u - v).abs(), u * v], dim=-1))


def test_mean_pooling_leaves_the_padding_out_and_cross_encoded_sts_is_five_times_its_score(tiny_model):
    model = _model(tiny_model, 0.0, pair_encoding="cross").eval()
    ids, types = torch.tensor([[2, 7, 8, 3, 9, 3, 0, 0]]), torch.tensor([[0, 0, 0, 0, 1, 1, 0, 0]])
    mask = (ids != 0).long()
    with torch.no_grad():
        torch.testing.assert_close(model(ids, mask, types), model(ids[:, :6], mask[:, :6], types[:, :6]))
        out = model.task_forward("sts", {"x": {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}})
        score = torch.sigmoid(model.sts_head(model(ids, mask, types)).squeeze(-1))
    torch.testing.assert_close(out.score, score)
    torch.testing.assert_close(out.output, 5 * score)  # on the STS scale, 0..5
