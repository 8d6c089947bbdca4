"""freezing.py: --freeze_layers keeps the embeddings and the K lowest layers out of the gradient; --gradual_unfreeze
unfreezes one group from the top every N optimizer steps, the embeddings last, and the frozen groups do not change."""
import pytest
import torch

import multitask_classifier as mt
from bert import BertModel
from minbert.finetuning.freezing import GradualUnfreezing, frozen_parameters, setup_freezing
from minbert.specs import ModelSpec
from minbert.tasks.multitask import MultitaskBERT
from minbert.training.trainer import describe_trainable
from tests.course import part2_args
from utils import MinbertError


def _grads_after_one_batch(model):
    ids = torch.tensor([[2, 7, 8, 9, 3], [2, 10, 11, 3, 0]])
    mask = (ids != 0).long()
    model.zero_grad(set_to_none=True)
    model.predict_sentiment(ids, mask).sum().backward()
    return {n for n, p in model.named_parameters() if p.grad is not None}


def _group(name):
    """The group of a BERT parameter: 'embeddings', 'layer 0', ... ; others (pooler, heads) are 'top'."""
    if name.startswith("bert.bert_layers."):
        return f"layer {name.split('.')[2]}"
    return "embeddings" if name.split(".")[1] in ("word_embedding", "pos_embedding", "tk_type_embedding",
                                                   "embed_layer_norm") else "top"


@pytest.mark.parametrize("k, trained", [(0, {"embeddings", "layer 0", "layer 1", "top"}),
                                        (1, {"layer 1", "top"}), (2, {"top"})])
def test_freeze_layers_keeps_the_lowest_groups_out_of_the_gradient(tiny_model, k, trained):
    model = MultitaskBERT(ModelSpec(pretrained=str(tiny_model), dropout=[0.0] * 3))
    setup_freezing(model.bert, freeze_layers=k, log=lambda *_: None)
    with_grad = _grads_after_one_batch(model)
    assert {_group(n) for n in with_grad} == trained
    # the start line counts what receives a gradient, and the optimizer state it needs (Lion: one tensor each)
    info = describe_trainable(model, "lion", frozen_parameters(model.bert, k))
    assert info["trainable"] == sum(p.numel() for n, p in model.named_parameters() if _group(n) in trained)
    assert info["optimizer_state_bytes"] == 4 * info["trainable"]
    assert all(p.requires_grad for p in model.parameters())  # saved in checkpoints as before: nothing changes shape


def test_gradual_unfreezing_unfreezes_one_group_from_the_top_every_n_steps(tiny_model):
    bert = BertModel.from_pretrained(str(tiny_model))  # 2 layers: 3 groups
    schedule = GradualUnfreezing(bert, every=2)
    assert [schedule.frozen_at(s) for s in range(8)] == [3, 3, 2, 2, 1, 1, 0, 0]
    floor = GradualUnfreezing(bert, every=2, floor=2)  # with --freeze_layers 1: embeddings and layer 0 never
    assert [floor.frozen_at(s) for s in range(6)] == [3, 3, 2, 2, 2, 2]
    model = MultitaskBERT(ModelSpec(pretrained=str(tiny_model), dropout=[0.0] * 3))
    schedule = setup_freezing(model.bert, gradual_unfreeze=1, log=lambda *_: None)
    seen = []
    for step in range(4):
        schedule(step)
        seen.append({_group(n) for n in _grads_after_one_batch(model)})
    assert seen == [{"top"}, {"top", "layer 1"}, {"top", "layer 1", "layer 0"},
                    {"top", "layer 1", "layer 0", "embeddings"}]


def test_a_gradually_unfrozen_run_leaves_the_still_frozen_groups_as_they_were(tmp_path, course_data, tiny_model, capsys):
    """Four steps, one group every two: steps 0-1 train the heads, steps 2-3 also layer 1."""
    mt.main(part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "4",
                       "--gradual_unfreeze", "2", "--rdrop_weight", "0"))
    assert "gradual unfreezing: BERT frozen at the start, one more group from the top every 2" in capsys.readouterr().out
    saved = torch.load(tmp_path / "ck" / "mt.pt", weights_only=True)["model"]
    start = BertModel.from_pretrained(str(tiny_model)).state_dict()
    changed = {_group(n) for n, v in saved.items() if n.startswith("bert.")
               and not torch.equal(v, start[n[len("bert."):]])}
    assert changed == {"layer 1"}  # (mean pooling: the pooler takes no part, so it stays as it was too)


def test_freezing_is_refused_where_it_cannot_act(tiny_model):
    with pytest.raises(MinbertError, match="--freeze_layers freezes BERT's layers, which --fine-tune-mode "
                                           "last-linear-layer freezes all of already"):
        mt.get_args(["--freeze_layers", "1", "--fine-tune-mode", "last-linear-layer"])
    with pytest.raises(MinbertError, match="--smart_weight needs the gradient at BERT's embeddings"):
        mt.get_args(["--gradual_unfreeze", "5", "--smart_weight", "1"])
    bert = BertModel.from_pretrained(str(tiny_model))
    with pytest.raises(MinbertError, match="--freeze_layers 3: the model has 2 layers"):
        setup_freezing(bert, freeze_layers=3)


def test_every_layer_frozen_under_prefix_tuning_is_refused_since_the_prefix_would_not_train(tiny_model):
    from minbert.finetuning.prefix import add_prefix
    model = MultitaskBERT(ModelSpec(pretrained=str(tiny_model), dropout=[0.0] * 3))
    model.prefix_module = add_prefix(model.bert, 2)
    layers = model.bert.config.num_hidden_layers
    with pytest.raises(MinbertError, match=f"--freeze_layers {layers} with --fine-tune-mode prefix: every layer frozen"):
        setup_freezing(model.bert, freeze_layers=layers, log=lambda *_: None)
    setup_freezing(model.bert, freeze_layers=layers - 1, log=lambda *_: None)  # the top layer's prefix still learns
    assert {n.split(".")[0] for n in _grads_after_one_batch(model)} >= {"prefix_module"}
