"""GPT-2's building blocks: attention.py (CausalSelfAttention), gpt2_layer.py (GPT2Layer)."""
