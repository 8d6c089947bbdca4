"""training/monitor.py: the TensorBoard event files hold the run's curves."""
import multitask_classifier as mt
from tests.course import part2_args


def test_tensorboard_event_files_hold_the_runs_curves(tmp_path, course_data, tiny_model):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    mt.main(part2_args(tmp_path, course_data, tiny_model, "--steps_per_epoch", "20"))
    events = EventAccumulator(str(tmp_path / "ck" / "tb-mt"))
    events.Reload()
    tags = set(events.Tags()["scalars"])
    assert {"train/loss", "train/lr", "dev/sst", "dev/quora", "dev/sts", "train/epoch_loss"} <= tags
    assert [e.step for e in events.Scalars("dev/sst")] == [20, 40]  # batches since the start, after each epoch
    mt.main(part2_args(tmp_path / "off", course_data, tiny_model, "--epochs", "1", "--no_tensorboard"))
    assert not list((tmp_path / "off" / "ck").glob("tb-*"))
