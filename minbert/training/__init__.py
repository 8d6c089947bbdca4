"""How training runs: one step (trainer.py), the epoch protocol with checkpoints, resuming and early stopping
(fit.py), learning-rate schedules (schedule.py) and the TensorBoard monitor (monitor.py)."""
