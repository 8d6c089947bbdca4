"""finetuning/prefix.py: prefix tuning trains only the prefix, every token attends to it, and --merge drops its
MLP and predicts the same."""
import torch

import multitask_classifier as mt
from bert import BertModel
from minbert.finetuning.modes import merge_for_inference
from tests.checkpoints import multitask_spec, parameters_with_gradients, tiny_batch


def test_prefix_tuning_trains_only_the_prefix_and_every_token_attends_to_it(tiny_model):
    model = mt.MultitaskBERT(multitask_spec(tiny_model, "prefix", prefix_length=3))
    with_grad = parameters_with_gradients(model)
    bert_part = {n for n in with_grad if n.startswith("bert.")}
    assert bert_part == {n for n, p in model.bert.named_parameters(prefix="bert") if n.startswith("bert.prefix_tuning.")}
    # the two attention paths agree with the prefix's keys and values prepended, padding included
    bert = model.bert.eval()
    ids, mask, _ = tiny_batch()
    mask[1, 4:] = 0
    sdpa = bert(ids, mask)["last_hidden_state"]
    for layer in bert.bert_layers:
        layer.self_attention.attn_impl = "explicit"
    torch.testing.assert_close(bert(ids, mask)["last_hidden_state"], sdpa, rtol=1e-5, atol=1e-5)
    kv = bert.prefix_tuning.keys_values()
    assert kv.shape == (2, 2, 4, 3, 8)  # layers, key/value, heads, length, head size
    # the prefix is attended: the output moves away from the plain model's, and back when the prefix is detached
    plain = BertModel.from_pretrained(str(tiny_model)).eval()
    assert not torch.allclose(sdpa, plain(ids, mask)["last_hidden_state"], atol=1e-4)
    for layer in bert.bert_layers:
        layer.self_attention.prefix = None
    torch.testing.assert_close(bert(ids, mask)["last_hidden_state"], plain(ids, mask)["last_hidden_state"])


def test_merging_a_prefix_drops_its_mlp_and_predicts_the_same(tiny_model):
    model = mt.MultitaskBERT(multitask_spec(tiny_model, "prefix")).eval()
    ids, mask, types = tiny_batch()
    with torch.no_grad():
        before = model.predict_similarity(ids, mask, token_type_ids=types)
        merge_for_inference(model.bert, True, "prefix", log=lambda *_: None)
        after = model.predict_similarity(ids, mask, token_type_ids=types)
    assert not hasattr(model.bert.prefix_tuning, "mlp") and model.bert.prefix_tuning.folded is not None
    torch.testing.assert_close(after, before, rtol=1e-6, atol=1e-6)
