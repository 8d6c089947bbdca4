"""bench.py's measurements: the rows it times (candidate.py: ours as the pipelines train, every switch off, HF
transformers on the same weights and batches), timing them against the matmul peak (timing.py), the whole run
(run.py), and where a step's time goes (profile.py)."""
