"""bench/timing.py: MFU against the measured peak, and a value above 100% named a measurement error."""
from minbert.bench.timing import mfu


def test_mfu_above_100_percent_is_reported_as_a_measurement_error():
    peak = {"best": 1e11, "median": 9e10, "worst": 5e10}
    assert mfu(5e10, peak) == (0.5, "")
    value, note = mfu(1.12e11, peak)
    assert value is None and note.startswith("measurement error: 112%")
    assert mfu(1e10, None) == (None, "no native peak for this precision")
