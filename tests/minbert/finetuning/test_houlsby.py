"""finetuning/houlsby.py: bottleneck adapters after each sub-layer train with the LayerNorms and start near the
identity; --merge is refused for them, saying why."""
import pytest

import multitask_classifier as mt
from bert import BertModel
from tests.checkpoints import multitask_spec, parameters_with_gradients, tiny_batch
from tests.course import part2_args
from utils import MinbertError


def test_houlsby_adapters_train_with_the_layer_norms_and_start_near_the_identity(tiny_model):
    from minbert.finetuning.houlsby import HoulsbyAdapter
    model = mt.MultitaskBERT(multitask_spec(tiny_model, "adapter", adapter_dim=4))
    layers = model.bert.bert_layers
    assert all(isinstance(l.attention_dense, HoulsbyAdapter) and isinstance(l.out_dense, HoulsbyAdapter) for l in layers)
    with_grad = parameters_with_gradients(model)
    assert with_grad == {n for n, p in model.named_parameters() if p.requires_grad}
    bert_part = {n for n in with_grad if n.startswith("bert.")}
    assert bert_part and all(".down." in n or ".up." in n or "layer_norm" in n for n in bert_part)
    assert sum(1 for n in bert_part if n.endswith("down.weight")) == 2 * len(layers)  # two adapters a layer
    # near the identity at the start: the pretrained model's output, moved only a little
    plain = BertModel.from_pretrained(str(tiny_model)).eval()
    model.eval()
    ids, mask, _ = tiny_batch()
    diff = (model.bert(ids, mask)["last_hidden_state"] - plain(ids, mask)["last_hidden_state"]).abs().max().item()
    assert 0 < diff < 0.05


def test_merge_is_refused_for_houlsby_adapters_saying_why(tmp_path, course_data, tiny_model):
    with pytest.raises(MinbertError, match="--merge cannot fold Houlsby adapters: a nonlinearity sits between"):
        mt.main(part2_args(tmp_path, course_data, tiny_model, "--fine-tune-mode", "adapter", "--merge"))
