"""The models and their data streams: Part 1's classifier (sentiment.py), Part 2's
MultitaskBERT (multitask.py), which task each step trains (sampling.py), extra training data
sets (extra.py) and masked LM (mlm.py)."""
