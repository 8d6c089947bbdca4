"""A run's files: its folder (folders.py) and lock (lock.py), what it may write elsewhere (outputs.py), which
run wrote each file there, by its contents (sources.py), and how it copies its files there (publishing.py),
its log (logs.py), its checkpoints (checkpoint.py) and the flags that define it (identity.py)."""
