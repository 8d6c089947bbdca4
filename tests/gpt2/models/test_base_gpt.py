"""gpt2/models/base_gpt.py: HF's GPT-2 names map onto ours in one table, at gpt2's and gpt2-medium's shapes (Conv1D
weights transposed, c_attn split, the tied LM head and mask buffers ignored); a checkpoint that does not fit names
what does not."""
import pytest
import torch

from gpt2.config import GPT2Config
from gpt2.models.base_gpt import hf_to_ours
from gpt2.models.gpt2 import GPT2Model
from utils import MinbertError


@pytest.mark.parametrize("shape", [dict(n_embd=768, n_layer=12, n_head=12),     # gpt2
                                   dict(n_embd=1024, n_layer=24, n_head=16)])  # gpt2-medium
def test_every_hf_tensor_lands_on_one_of_ours_with_its_shape(shape):
    """On the meta device: the names and shapes of the published checkpoints, without their memory."""
    from transformers import GPT2Config as HFConfig, GPT2LMHeadModel
    with torch.device("meta"):
        theirs = GPT2LMHeadModel(HFConfig(**shape)).state_dict()
        ours = GPT2Model(GPT2Config.from_dict(HFConfig(**shape).to_dict())).state_dict()
    mapped = {name: t.shape for k, v in theirs.items() for name, t in hf_to_ours(k, v)}
    assert mapped == {k: v.shape for k, v in ours.items()}


def test_conv1d_weights_are_transposed_and_c_attn_split():
    w = torch.arange(4 * 12, dtype=torch.float32).view(4, 12)  # Conv1D [in 4, out 3 x 4]
    q, k, v = hf_to_ours("transformer.h.0.attn.c_attn.weight", w)
    assert [n for n, _ in (q, k, v)] == [f"gpt_layers.0.self_attention.{p}.weight" for p in ("query", "key", "value")]
    torch.testing.assert_close(k[1], w[:, 4:8].t())
    (name, t), = hf_to_ours("h.1.mlp.c_fc.weight", w)
    assert name == "gpt_layers.1.interm_dense.weight" and torch.equal(t, w.t())
    assert hf_to_ours("lm_head.weight", w) == [] and hf_to_ours("h.0.attn.masked_bias", w) == []


def test_a_checkpoint_of_another_shape_is_named(tiny_gpt2):
    with pytest.raises(MinbertError, match=r"does not fit the model .* mis-shaped: word_embedding.weight"):
        GPT2Model(GPT2Config(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                             intermediate_size=128, max_position_embeddings=64)).load_pretrained_weights(
            GPT2Model.from_pretrained(tiny_gpt2).state_dict())
