"""A run's files: its folder and lock (folders.py), what it may write elsewhere (outputs.py) and how it puts
files there all or nothing (publishing.py), its log (logs.py), its checkpoints (checkpoint.py) and the flags
that define it (identity.py)."""
