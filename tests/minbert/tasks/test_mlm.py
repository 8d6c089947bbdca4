"""tasks/mlm.py: BERT's masking rule (15% chosen, of them 80% [MASK], 10% a random token, 10% kept, specials never)
on a fixed seed; each step's word-embedding gradient is that step's alone (the tied decoder's included); the MLM and
next-sentence logits equal HF's BertForPreTraining on its random weights; a checkpoint's heads are loaded where it
has them, fresh where not, and a head of the wrong shape is one line."""
import pytest
import torch

from minbert.tasks.mlm import IGNORE, BertForMaskedLM, mask_tokens
from tests.checkpoints import tiny_config, write_vocab
from utils import MinbertError


def hf_pretraining_checkpoint(folder, seed=0, **shape):
    """HF's BertForPreTraining at the tiny shape, random weights (LayerNorms and biases moved off their
    initial values, so a mix-up shows), saved by transformers in its layout; (folder, model)."""
    from transformers import BertConfig as HFConfig, BertForPreTraining
    torch.manual_seed(seed)
    config = HFConfig(**{**tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0).to_dict(),
                         **shape})
    theirs = BertForPreTraining(config).eval()
    with torch.no_grad():
        for name, p in theirs.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    theirs.save_pretrained(folder)
    write_vocab(folder / "vocab.txt")
    return folder, theirs


def test_masking_rule_on_a_fixed_seed():
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(10, 1000, (400, 50), generator=g)
    ids[:, 0], ids[:, -1], ids[:, 40:] = 2, 3, 0  # [CLS] ... [SEP] and padding
    special = (ids == 2) | (ids == 3) | (ids == 0)
    inputs, labels = mask_tokens(ids, special, 1000, mask_id=4, mask_prob=0.15, generator=g)
    chosen = labels != IGNORE
    assert not chosen[special].any() and torch.equal(inputs[special], ids[special])  # specials never touched
    assert torch.equal(labels[chosen], ids[chosen]) and (labels[~chosen] == IGNORE).all()
    assert torch.equal(inputs[~chosen], ids[~chosen])  # nothing outside the chosen ones changes
    n = int(chosen.sum())
    assert abs(n / int((~special).sum()) - 0.15) < 0.01
    masked = int((inputs[chosen] == 4).sum())
    kept = int((inputs[chosen] == ids[chosen]).sum())
    assert abs(masked / n - 0.8) < 0.02
    assert abs(kept / n - 0.1) < 0.02  # a random token equal to the original is rare here (1 in 1000)
    assert abs((n - masked - kept) / n - 0.1) < 0.02
    again = mask_tokens(ids, special, 1000, 4, 0.15, torch.Generator().manual_seed(0))
    g2 = torch.Generator().manual_seed(0)
    torch.randint(10, 1000, (400, 50), generator=g2)
    assert all(torch.equal(a, b) for a, b in zip(mask_tokens(ids, special, 1000, 4, 0.15, g2), (inputs, labels)))
    assert again[0].shape == ids.shape


def test_each_steps_word_embedding_gradient_is_that_steps_alone():
    """The decoder is tied to the word embeddings: its dense gradient must not pile up across steps in the
    lookup's reused gradient buffer (a resumed run, starting with an empty one, would then train differently)."""
    import copy

    from bert import BertModel
    from minbert.tasks.mlm import BertForMaskedLM
    from tests.checkpoints import tiny_config
    torch.manual_seed(0)
    model = BertForMaskedLM(BertModel(tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)))
    g = torch.Generator().manual_seed(1)
    steps = []
    for _ in range(3):
        ids = torch.randint(5, model.config.vocab_size, (2, 6), generator=g)
        labels = torch.full_like(ids, IGNORE)
        labels[:, 2] = ids[:, 2]
        steps.append((ids, labels))
    weight = model.bert.word_embedding.weight
    for ids, labels in steps:  # the same weights each time (no optimizer step): the same gradient as a fresh model's
        weight.grad = None
        model(ids, torch.ones_like(ids), labels)[0].backward()
        fresh = copy.deepcopy(model)
        fresh.bert.word_embedding.weight.grad = None
        fresh(ids, torch.ones_like(ids), labels)[0].backward()
        torch.testing.assert_close(weight.grad, fresh.bert.word_embedding.weight.grad, rtol=0, atol=1e-7)


def test_mlm_and_next_sentence_logits_equal_hf_bert_for_pretraining(tmp_path):
    """The same random weights through our BertForMaskedLM (every position chosen, so the decoder sees them all)
    and HF's BertForPreTraining: prediction_logits and seq_relationship_logits agree to fp32 rounding, on
    cross-encoded pairs with token types and padding."""
    folder, theirs = hf_pretraining_checkpoint(tmp_path / "hf")
    ours, loaded = BertForMaskedLM.from_pretrained(folder, nsp=True)
    assert loaded == {"mlm", "nsp"}
    ours.eval()
    ids = torch.tensor([[2, 7, 9, 11, 3, 12, 13, 3, 0, 0], [2, 12, 13, 14, 3, 15, 16, 17, 18, 3]])
    mask = (ids != 0).long()
    types = torch.tensor([[0, 0, 0, 0, 0, 1, 1, 1, 0, 0], [0, 0, 0, 0, 0, 1, 1, 1, 1, 1]])
    with torch.no_grad():
        hf = theirs(input_ids=ids, attention_mask=mask, token_type_ids=types)
        out = ours(ids, mask, ids.masked_fill(mask == 0, IGNORE), types)
    keep = mask.bool()
    torch.testing.assert_close(out.logits, hf.prediction_logits[keep], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.next_logits, hf.seq_relationship_logits, rtol=1e-5, atol=1e-5)
    assert not torch.allclose(out.next_logits[0], out.next_logits[1])  # the pairs differ, so do their logits


def test_heads_load_where_the_checkpoint_has_them_and_start_fresh_where_not(tmp_path, tiny_model):
    """The tiny checkpoint has neither head (a lone decoder bias is none); HF's BertForPreTraining has both, and
    a head written by checkpoint_tensors reloads as it was."""
    fresh, loaded = BertForMaskedLM.from_pretrained(tiny_model, nsp=True)
    assert loaded == set() and fresh.nsp.weight.shape == (2, 32)
    folder, theirs = hf_pretraining_checkpoint(tmp_path / "hf")
    mlm_only, loaded = BertForMaskedLM.from_pretrained(folder)
    assert loaded == {"mlm"} and mlm_only.nsp is None
    ours, _ = BertForMaskedLM.from_pretrained(folder, nsp=True)
    assert torch.equal(ours.nsp.weight, theirs.cls.seq_relationship.weight)
    written = ours.checkpoint_tensors()
    assert torch.equal(written["cls.seq_relationship.bias"], theirs.cls.seq_relationship.bias)


def test_a_next_sentence_head_of_the_wrong_shape_is_one_line(tmp_path):
    """A checkpoint whose seq_relationship has 3 outputs (a three-way sentence task's head) is refused, naming the
    file, the tensor and both shapes; without --nsp its head is not read at all."""
    from safetensors.torch import load_file, save_file
    folder, _ = hf_pretraining_checkpoint(tmp_path / "hf")
    state = load_file(str(folder / "model.safetensors"))
    state["cls.seq_relationship.weight"] = torch.zeros(3, 32)
    state["cls.seq_relationship.bias"] = torch.zeros(3)
    save_file(state, str(folder / "model.safetensors"))
    with pytest.raises(MinbertError, match=r"model.safetensors: its NSP head does not fit the model \(hidden_size "
                                           r"32, .*\): cls.seq_relationship.weight \[3, 32\], the model's \[2, 32\]"):
        BertForMaskedLM.from_pretrained(folder, nsp=True)
    assert BertForMaskedLM.from_pretrained(folder)[1] == {"mlm"}


def test_random_replacements_reach_every_id_of_the_vocabulary():
    """The 10% of chosen tokens replaced at random draw from all vocab_size ids, the last one included."""
    ids = torch.full((64, 64), 3)
    inputs, labels = mask_tokens(ids, torch.zeros_like(ids, dtype=torch.bool), 8, 7, 1.0,
                                 torch.Generator().manual_seed(0))
    replaced = inputs[(inputs != 7) & (inputs != 3)]  # neither [MASK] (7) nor kept
    assert set(replaced.tolist()) | {3, 7} == set(range(8))
    assert (labels == 3).all()  # every token chosen at mask_prob 1, its label the original


def test_the_loss_is_the_mean_cross_entropy_over_the_chosen_tokens(tiny_model):
    """Three chosen positions of eighteen: the loss is their mean cross-entropy, computed here from the logits."""
    import torch.nn.functional as F
    model, _ = BertForMaskedLM.from_pretrained(tiny_model)
    ids = torch.randint(5, 40, (2, 9), generator=torch.Generator().manual_seed(0))
    labels = torch.full_like(ids, IGNORE)
    labels[0, 2], labels[1, 4], labels[1, 7] = ids[0, 2], ids[1, 4], ids[1, 7]
    out = model.eval()(ids, torch.ones_like(ids), labels)
    assert out.logits.shape == (3, model.config.vocab_size)
    torch.testing.assert_close(out.loss, F.cross_entropy(out.logits.float(), labels[labels != IGNORE]))


def test_a_fresh_head_starts_at_the_configs_initializer_range(tiny_model):
    model, loaded = BertForMaskedLM.from_pretrained(tiny_model, nsp=True)
    assert loaded == set()
    for w in (model.head.dense.weight, model.nsp.weight):
        assert abs(float(w.std()) - model.config.initializer_range) < 0.3 * model.config.initializer_range
    assert not model.head.dense.bias.any() and not model.nsp.bias.any()


def test_a_head_saved_under_tensorflows_layernorm_names_loads(tmp_path, tiny_model):
    """Old TF-converted checkpoints name a LayerNorm's weight gamma and its bias beta: the head's LayerNorm gets
    gamma as its weight, beta as its bias."""
    import shutil
    from safetensors.torch import load_file, save_file
    folder = tmp_path / "tf"
    shutil.copytree(tiny_model, folder)
    weights = load_file(str(folder / "model.safetensors"))
    h = tiny_config().hidden_size
    head = {"cls.predictions.transform.dense.weight": torch.randn(h, h), "cls.predictions.transform.dense.bias":
            torch.randn(h), "cls.predictions.transform.LayerNorm.gamma": torch.full((h,), 2.0),
            "cls.predictions.transform.LayerNorm.beta": torch.full((h,), -1.0),
            "cls.predictions.bias": torch.zeros(tiny_config().vocab_size)}
    save_file({**weights, **head}, str(folder / "model.safetensors"))
    model, loaded = BertForMaskedLM.from_pretrained(folder)
    assert loaded == {"mlm"}
    assert (model.head.layer_norm.weight == 2.0).all() and (model.head.layer_norm.bias == -1.0).all()


def test_the_masking_rate_at_its_ends():
    """mask_prob 0 chooses nothing and 1 every token but the specials."""
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(10, 1000, (6, 12), generator=g)
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = special[:, -3:] = True
    inputs, labels = mask_tokens(ids, special, 1000, mask_id=4, mask_prob=0.0, generator=g)
    assert torch.equal(inputs, ids) and (labels == IGNORE).all()
    inputs, labels = mask_tokens(ids, special, 1000, mask_id=4, mask_prob=1.0, generator=g)
    assert torch.equal(labels != IGNORE, ~special) and torch.equal(labels[~special], ids[~special])
    assert torch.equal(inputs[special], ids[special])


def test_a_batch_with_no_chosen_token_has_loss_zero(tiny_model):
    """Nothing to predict: loss 0, not the NaN of a mean over no tokens (which would read as a diverged run)."""
    model, _ = BertForMaskedLM.from_pretrained(tiny_model)
    ids = torch.randint(5, 40, (2, 6), generator=torch.Generator().manual_seed(0))
    out = model.eval()(ids, torch.ones_like(ids), torch.full_like(ids, IGNORE))
    assert out.logits.shape == (0, model.config.vocab_size) and float(out.loss) == 0.0
