"""A run's files: its folder and lock (folders.py), what it may write elsewhere and how it publishes
(outputs.py), its log (logs.py), its checkpoints (checkpoint.py) and the flags that define it (identity.py)."""
