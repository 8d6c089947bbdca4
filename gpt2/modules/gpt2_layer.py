"""GPT2Layer (handout section 5.2): pre-LayerNorm residual blocks, masked self-attention then a GELU MLP.

    h = x + dropout(W_o attention(LN_1(x)))
    y = h + dropout(W_2 gelu(W_1 LN_2(h)))

GPT-2 normalises each sub-layer's input, not its output as BERT does, and its GELU is the tanh approximation
(HF's "gelu_new"), which the published weights were trained with."""
import torch.nn as nn

from gpt2.modules.attention import CausalSelfAttention


class GPT2Layer(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.self_attention = CausalSelfAttention(config)
        self.attention_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.attention_dense = nn.Linear(config.hidden_size, config.hidden_size)
        self.attention_dropout = nn.Dropout(config.hidden_dropout_prob)
        self.out_layer_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.interm_dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.interm_af = nn.GELU(approximate="tanh")
        self.out_dense = nn.Linear(config.intermediate_size, config.hidden_size)
        self.out_dropout = nn.Dropout(config.hidden_dropout_prob)

    def add(self, input, output, dense_layer, dropout):
        """The residual connection: the sub-layer's output projected, dropped out, and added to its input."""
        return input + dropout(dense_layer(output))

    def forward(self, hidden_states, attention_mask=None, past=None):
        """Returns the layer's output and its (K, V) for the cache (see CausalSelfAttention.forward)."""
        attended, present = self.self_attention(self.attention_layer_norm(hidden_states), attention_mask,
                                                past)
        hidden_states = self.add(hidden_states, attended, self.attention_dense, self.attention_dropout)
        mlp = self.interm_af(self.interm_dense(self.out_layer_norm(hidden_states)))
        return self.add(hidden_states, mlp, self.out_dense, self.out_dropout), present
