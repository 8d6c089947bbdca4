"""A live view of a run in TensorBoard (on by default; --no_tensorboard turns it off).

training/fit.py writes event files into the run folder, runs/NAME/tb-MODEL/: the training loss and learning
rate every few batches, and after each epoch every dev metric, the dev score, the epoch's mean training loss
and each loss term. Watch every run at once with

    tensorboard --logdir runs

The x axis is the number of training batches since the run started (a resumed run goes on counting).
"""
import sys


class TensorBoard:
    def __init__(self, folder):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # a venv of the user's own making, without the package: no live view, say so once
            print("tensorboard is not installed, so this run writes no event files (pip install tensorboard)",
                  file=sys.stderr)
            self.writer = None
            return
        self.writer = SummaryWriter(str(folder))

    def step(self, batches, loss, lr):
        if self.writer is not None:
            self.writer.add_scalar("train/loss", loss, batches)
            self.writer.add_scalar("train/lr", lr, batches)

    def epoch(self, batches, record):
        if self.writer is None:
            return
        for name, value in record["dev"].items():
            if isinstance(value, (int, float)):
                self.writer.add_scalar(f"dev/{name}", value, batches)
        self.writer.add_scalar(f"dev/score ({record['score_name']})", record["dev_score"], batches)
        self.writer.add_scalar("train/epoch_loss", record["train_loss"], batches)
        for name, value in record["loss_terms"].items():
            self.writer.add_scalar(f"loss_terms/{name}", value, batches)
        self.writer.flush()

    def close(self):
        if self.writer is not None:
            self.writer.close()
