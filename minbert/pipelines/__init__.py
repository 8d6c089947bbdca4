"""What the commands run, on typed settings: classifier.py (Part 1), multitask.py (Part 2),
pretrain.py and ensemble.py."""
