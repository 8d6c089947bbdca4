"""GPT-2's model classes: base_gpt.py (weights in and out), gpt2.py (GPT2Model)."""
