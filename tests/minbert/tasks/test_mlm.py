"""tasks/mlm.py: BERT's masking rule (15% chosen, of them 80% [MASK], 10% a random token, 10% kept, specials never)
on a fixed seed."""
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
