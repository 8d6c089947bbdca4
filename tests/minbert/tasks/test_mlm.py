"""tasks/mlm.py: BERT's masking rule (15% chosen, of them 80% [MASK], 10% a random token, 10% kept, specials never)
on a fixed seed; each step's word-embedding gradient is that step's alone (the tied decoder's included)."""
import torch

from minbert.tasks.mlm import IGNORE, mask_tokens


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
