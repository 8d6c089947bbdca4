"""finetuning/pals.py: projected attention layers, their default width, a zero output projection leaving BERT as
it was, and --pals on a frozen or a trained backbone end to end."""
import pytest
import torch

import multitask_classifier as mt
from bert import BertModel
from minbert.finetuning.pals import PALs, default_dim
from tests.checkpoints import multitask_spec, tiny_batch, tiny_config
from tests.course import part2_args
from utils import MinbertError


def test_pals_default_dim():
    assert default_dim(768, 12) == 204  # the paper's BERT-base setting
    assert default_dim(384, 12) == 96 and default_dim(32, 4) == 8


def test_pal_with_zero_output_projection_leaves_bert_unchanged():
    torch.manual_seed(0)
    bert = BertModel(tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)).eval()
    ids, mask, _ = tiny_batch()
    mask[1, 5:] = 0
    before = bert(ids, mask)["last_hidden_state"]
    pals = PALs(bert.config, ("sst", "sts"))
    pals.attach(bert)
    pals.task = "sst"
    torch.testing.assert_close(bert(ids, mask)["last_hidden_state"], before, rtol=0, atol=0)
    with torch.no_grad():
        for d in pals.decoder.values():
            d.weight.normal_(0, 0.5)
    pals.task = "sst"
    sst = bert(ids, mask)["last_hidden_state"]
    pals.task = "sts"
    assert not torch.allclose(sst, before) and not torch.allclose(sst, bert(ids, mask)["last_hidden_state"])


def test_pals_on_a_frozen_backbone_train_alone(tiny_model):
    model = mt.MultitaskBERT(multitask_spec(tiny_model, "last-linear-layer", pals=True))
    ids, mask, _ = tiny_batch()
    model.predict_sentiment(ids, mask).sum().backward()
    with_grad = {n.split(".")[0] for n, p in model.named_parameters() if p.grad is not None}
    assert with_grad == {"pals", "sst_head"}
    assert all(p.grad is None for p in model.bert.parameters())
    # only SST's branch took part in an SST batch
    assert all(p.grad is None for n, p in model.pals.named_parameters() if "sst" not in n)


def test_multitask_pals_end_to_end(tmp_path, course_data, tiny_model, capsys):
    mt.main(part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--pals", "--pals_dim", "8",
                    "--fine-tune-mode", "last-linear-layer"))
    saved = torch.load(tmp_path / "ck" / "mt.pt", weights_only=True)["model"]
    assert any(k.startswith("pals.") for k in saved) and not any(k.startswith("bert.") for k in saved)
    assert "last-linear-layer + PALs" in capsys.readouterr().out
    with pytest.raises(MinbertError, match="--pals_dim 8 in the checkpoint, 16 given"):
        mt.main(part2_args(tmp_path, course_data, tiny_model, "--pals_dim", "16",
                        "--eval_only", str(tmp_path / "ck" / "mt.pt")))
