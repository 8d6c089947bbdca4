"""gpt2/generation.py: greedy decoding with the key-value cache gives the uncached loop's tokens and HF's
generate's, token for token; top-p keeps the smallest set of tokens reaching p; temperature divides the logits;
the stream runs until the last position has predicted its token."""
import pytest
import torch

from gpt2.generation import generate, next_token
from gpt2.models.gpt2 import GPT2Model
from tests.processes import DEVICES


@pytest.mark.parametrize("device", DEVICES)
def test_greedy_with_and_without_cache_equals_hf_generate(tiny_gpt2, device):
    from transformers import GPT2LMHeadModel
    theirs = GPT2LMHeadModel.from_pretrained(tiny_gpt2).to(device).eval()
    ours = GPT2Model.from_pretrained(tiny_gpt2).to(device).eval()
    for seed in range(3):
        torch.manual_seed(seed)
        prompt = torch.randint(1, ours.config.vocab_size, (1, 6)).to(device)
        cached = generate(ours, prompt, 30)
        uncached = generate(ours, prompt, 30, use_cache=False)
        hf = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=30, do_sample=False,
                             eos_token_id=None, pad_token_id=0)
        assert cached.tolist() == uncached.tolist() == hf.tolist()


def test_top_p_samples_only_from_the_nucleus():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    g = torch.Generator().manual_seed(0)
    drawn = {next_token(logits, 1.0, 0.7, g).item() for _ in range(300)}
    assert drawn == {0, 1}  # 0.5 + 0.3 reaches 0.7; 2 and 3 are never drawn
    assert next_token(logits, 0.0).item() == 0
    assert {next_token(logits, 1.0, 1.0, g).item() for _ in range(300)} == {0, 1, 2, 3}


def test_a_prompt_too_long_for_the_positions_is_refused(tiny_gpt2):
    model = GPT2Model.from_pretrained(tiny_gpt2).eval()
    with pytest.raises(ValueError, match="exceeds the model's 64 positions"):
        generate(model, torch.zeros(1, 60, dtype=torch.long), 10)


def test_temperature_divides_the_logits_and_top_p_stops_once_p_is_reached():
    """At temperature 2 the draws follow softmax(logits / 2); a nucleus that reaches p exactly with its first
    token is that token alone (the smallest set whose mass is at least p)."""
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.1]]))
    g = torch.Generator().manual_seed(0)
    draws = torch.stack([next_token(logits.expand(1000, -1), 2.0, 1.0, g) for _ in range(4)]).flatten()
    expected = torch.softmax(logits[0] / 2.0, -1)  # 0.47, 0.33, 0.19 (at temperature 1: 0.6, 0.3, 0.1)
    torch.testing.assert_close(torch.bincount(draws, minlength=3) / draws.numel(), expected, atol=0.02, rtol=0)
    half = torch.log(torch.tensor([[0.5, 0.25, 0.25]]))
    assert {next_token(half, 1.0, 0.5, g).item() for _ in range(100)} == {0}
    assert {next_token(half, 1.0, 0.51, g).item() for _ in range(300)} == {0, 1}  # 0.75 reaches 0.51


def test_the_stream_runs_until_the_last_position_has_predicted_its_token(tiny_gpt2):
    """A model of 64 positions continues a 60-token prompt by 5 tokens: the fifth is predicted at position 63,
    as HF's model predicts it from the 64 tokens before it."""
    from transformers import GPT2LMHeadModel
    from gpt2.generation import stream
    ours = GPT2Model.from_pretrained(tiny_gpt2).eval()
    prompt = torch.randint(1, ours.config.vocab_size, (1, 60), generator=torch.Generator().manual_seed(0))
    tokens = list(stream(ours, prompt))
    assert len(tokens) == 5
    seen = torch.cat([prompt, torch.stack(tokens[:4], dim=1)], dim=1)
    with torch.no_grad():
        assert GPT2LMHeadModel.from_pretrained(tiny_gpt2).eval()(seen).logits[0, -1].argmax() == tokens[-1]
