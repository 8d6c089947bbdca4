"""sweep.py's Optuna studies: the search space (space.py), the study database and its workers (storage.py),
one trial's processes (trials.py) and the study loop (study.py)."""
