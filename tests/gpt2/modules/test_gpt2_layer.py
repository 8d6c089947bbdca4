"""gpt2/modules/gpt2_layer.py: the layer is two pre-LayerNorm residual blocks, written out here by hand."""
import torch

from gpt2.config import GPT2Config
from gpt2.modules.gpt2_layer import GPT2Layer


def test_layer_is_two_pre_norm_residual_blocks():
    torch.manual_seed(0)
    layer = GPT2Layer(GPT2Config(hidden_size=16, num_attention_heads=4, intermediate_size=32)).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        out, (k, v) = layer(x)
        a, _ = layer.self_attention(layer.attention_layer_norm(x))
        h = x + layer.attention_dense(a)
        y = h + layer.out_dense(torch.nn.functional.gelu(layer.interm_dense(layer.out_layer_norm(h)), approximate="tanh"))
    torch.testing.assert_close(out, y)
    assert k.shape == v.shape == (2, 4, 5, 4)
