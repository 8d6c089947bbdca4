"""gpt2/modules/attention.py: the spelled-out attention and SDPA agree; the mask blocks the future and padding;
attending with a cache gives what attending to the whole sequence gives."""
import torch

from gpt2.config import GPT2Config
from gpt2.modules.attention import CausalSelfAttention, causal_mask


def _layer(impl):
    torch.manual_seed(0)
    return CausalSelfAttention(GPT2Config(hidden_size=16, num_attention_heads=4, attn_impl=impl)).eval()


def test_mask_blocks_later_tokens_and_padding():
    m = causal_mask(3, 3, torch.tensor([[1, 1, 0]]), torch.float32)[0, 0]
    assert (m == 0).tolist() == [[True, False, False], [True, True, False], [True, True, False]]
    m = causal_mask(1, 4, None, torch.float32)[0, 0]  # one new query after three cached keys sees all four
    assert (m == 0).tolist() == [[True, True, True, True]]


def test_explicit_and_sdpa_agree_and_the_cache_changes_nothing():
    x = torch.randn(2, 7, 16)
    mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2])
    with torch.no_grad():
        full, _ = _layer("explicit")(x, mask)
        fast, _ = _layer("sdpa")(x, mask)
        torch.testing.assert_close(full, fast, rtol=1e-5, atol=1e-6)
        first, past = _layer("sdpa")(x[:, :4], mask[:, :4])
        rest, _ = _layer("sdpa")(x[:, 4:], mask, past)
    torch.testing.assert_close(torch.cat([first, rest], 1)[0], full[0], rtol=1e-5, atol=1e-6)
