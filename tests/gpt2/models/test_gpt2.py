"""gpt2/models/gpt2.py: GPT2Model equals HF transformers' GPT-2 on the same (random) weights: hidden states, the
last real token of right-padded rows, and the tied LM head's logits, through both attention paths."""
import pytest
import torch

from gpt2.models.gpt2 import GPT2Model
from tests.processes import DEVICES


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("attn", ["sdpa", "explicit"])
def test_hidden_states_last_token_and_logits_equal_hf(tiny_gpt2, attn, device):
    from transformers import GPT2LMHeadModel
    theirs = GPT2LMHeadModel.from_pretrained(tiny_gpt2).to(device).eval()
    ours = GPT2Model.from_pretrained(tiny_gpt2, attn_impl=attn).to(device).eval()
    torch.manual_seed(1)
    ids = torch.randint(0, ours.config.vocab_size, (3, 12)).to(device)
    mask = torch.ones_like(ids)
    mask[1, 8:], mask[2, 3:] = 0, 0  # right padding, as the tokenizer pads
    with torch.no_grad():
        out = ours(ids, mask)
        ref = theirs(ids, attention_mask=mask, output_hidden_states=True)
    real = mask.bool()
    torch.testing.assert_close(out["last_hidden_state"][real], ref.hidden_states[-1][real], rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out["last_token"], ref.hidden_states[-1][torch.arange(3), torch.tensor([11, 7, 2])],
                               rtol=1e-5, atol=1e-5)
    logits = ours.hidden_state_to_token(out["last_hidden_state"])
    torch.testing.assert_close(logits[real], ref.logits[real], rtol=1e-5, atol=1e-5)


def test_a_later_token_never_changes_an_earlier_state(tiny_gpt2):
    """Causality: appending tokens leaves every earlier position's hidden state as it was."""
    model = GPT2Model.from_pretrained(tiny_gpt2).eval()
    ids = torch.randint(0, model.config.vocab_size, (1, 10))
    with torch.no_grad():
        short, long = model(ids[:, :6])["last_hidden_state"], model(ids)["last_hidden_state"][:, :6]
    torch.testing.assert_close(short, long, rtol=1e-5, atol=1e-5)
