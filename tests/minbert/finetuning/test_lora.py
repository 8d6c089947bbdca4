"""lora.py: LoRA/DoRA wrappers around our linears (the pipelines' --fine-tune-mode lora|dora is not wired yet)."""
import pytest
import torch
import torch.nn as nn

from bert import BertModel
from minbert.finetuning.lora import LoRALinear, add_adapters, merge_adapters
from tests.checkpoints import tiny_config


def _model(seed=0):
    torch.manual_seed(seed)
    return BertModel(tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)).eval()


def _inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(5, 40, (3, 9), generator=g)
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    return ids, mask


@pytest.mark.parametrize("dora", [False, True])
def test_step_zero_equals_the_base_model(dora):
    model = _model()
    ids, mask = _inputs()
    before = model(ids, mask)["last_hidden_state"]
    add_adapters(model, ("query", "key", "value", "attention_dense", "interm_dense", "out_dense"), dora=dora)
    after = model(ids, mask)["last_hidden_state"]
    torch.testing.assert_close(after, before, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dora", [False, True])
def test_only_adapters_get_gradients_and_merge_keeps_outputs(dora):
    model = _model()
    ids, mask = _inputs()
    wrapped = add_adapters(model, ("query", "value"), rank=4, alpha=8, dora=dora)
    with torch.no_grad():  # a trained-looking adapter, so the merge has something to fold in
        for w in wrapped:
            w.lora_B.normal_(0, 0.2)
            if dora:
                w.magnitude.mul_(torch.empty_like(w.magnitude).uniform_(0.5, 1.5))
    model(ids, mask)["last_hidden_state"].sum().backward()
    with_grad = {n for n, p in model.named_parameters() if p.grad is not None}
    assert with_grad and all(n.split(".")[-1] in ("lora_A", "lora_B", "magnitude") for n in with_grad)
    assert len(with_grad) == len(wrapped) * (3 if dora else 2)
    unmerged = model(ids, mask)["last_hidden_state"].detach()
    assert merge_adapters(model) == len(wrapped)
    assert not any(isinstance(m, LoRALinear) for m in model.modules())
    torch.testing.assert_close(model(ids, mask)["last_hidden_state"], unmerged, rtol=1e-4, atol=1e-5)


def test_dora_column_norms_by_hand():
    torch.manual_seed(0)
    base = nn.Linear(5, 3)
    layer = LoRALinear(base, rank=2, alpha=4, dora=True)
    with torch.no_grad():
        layer.lora_B.copy_(torch.arange(6.0).view(3, 2) / 10)
    v = base.weight + 2.0 * layer.lora_B @ layer.lora_A  # alpha / r = 2
    by_hand = torch.stack([sum(v[i, j] ** 2 for j in range(5)).sqrt() for i in range(3)])
    torch.testing.assert_close(layer.column_norm(), by_hand)
    assert not layer.column_norm().requires_grad  # detached, as the paper does
    torch.testing.assert_close(layer.magnitude, base.weight.norm(dim=1))  # m starts at ||W0||_c
    x = torch.randn(4, 5)
    expected = x @ (layer.magnitude.unsqueeze(1) * v / by_hand.unsqueeze(1)).T + base.bias
    torch.testing.assert_close(layer(x), expected)


def test_unknown_target_is_refused():
    with pytest.raises(ValueError, match="unknown adapter target"):
        add_adapters(_model(), ("query", "keys"))


def test_a_target_named_twice_is_refused():
    """The library refuses it as --lora_targets does: wrapping one linear twice had wrapped its own wrapper
    (an AttributeError after the model loaded)."""
    with pytest.raises(ValueError, match="each may be named once"):
        add_adapters(_model(), ("query", "value", "query"))


def test_peft_oracle():
    import peft  # here: its import (transformers' too) takes seconds, which every test file's collection paid
    for dora in (False, True):
        torch.manual_seed(0)
        base = nn.Sequential(nn.Linear(6, 4))
        ours = LoRALinear(nn.Linear(6, 4), rank=2, alpha=4, dora=dora)
        ours.base.load_state_dict(base[0].state_dict())
        theirs = peft.get_peft_model(base, peft.LoraConfig(r=2, lora_alpha=4, target_modules=["0"], use_dora=dora))
        layer = theirs.base_model.model[0]
        with torch.no_grad():
            ours.lora_B.normal_()
            layer.lora_A["default"].weight.copy_(ours.lora_A)
            layer.lora_B["default"].weight.copy_(ours.lora_B)
            if dora:
                ours.magnitude.copy_(layer.lora_magnitude_vector["default"].weight)
        x = torch.randn(5, 6)
        torch.testing.assert_close(ours(x), theirs(x), rtol=1e-5, atol=1e-5)


def test_each_backbone_names_the_layer_parts_the_adapters_use(tiny_model, tiny_gpt2):
    """The backbone contract's table (LAYER_PARTS) finds every part a role names, in BERT's layers and GPT-2's:
    LoRA's linears, Houlsby's linears and LayerNorms, BERT's prefix hook and parallel branch; a role a backbone
    leaves out is one line."""
    from bert import BertModel
    from gpt2.models.gpt2 import GPT2Model
    from minbert.finetuning.lora import TARGETS, layer_part
    bert, gpt2 = BertModel.from_pretrained(str(tiny_model)), GPT2Model.from_pretrained(str(tiny_gpt2))
    for backbone in (bert, gpt2):
        layer = backbone.layers[0]
        for role in TARGETS:
            assert isinstance(getattr(*layer_part(backbone, layer, role)), torch.nn.Linear), role
        for role in ("attention_layer_norm", "out_layer_norm"):
            assert isinstance(getattr(*layer_part(backbone, layer, role)), torch.nn.LayerNorm), role
    for role in ("prefix", "parallel"):  # hooks, empty until prefix tuning or PALs attach
        parent, attr = layer_part(bert, bert.layers[0], role)
        assert hasattr(parent, attr) and getattr(parent, attr) is None
    with pytest.raises(ValueError, match="GPT2Model's layers have no prefix"):
        layer_part(gpt2, gpt2.layers[0], "prefix")
