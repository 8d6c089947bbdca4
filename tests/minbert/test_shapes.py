"""minbert/shapes.py: a batch's width (its longest row, rounded to --pad_multiple within --max_length, or the
smallest fixed width that holds it), --pad_multiple by device, and the few widths chosen from a dataset."""
import torch

from minbert.shapes import choose_widths, padded_width, resolve_pad_multiple


def test_padded_width_rounds_up_within_max_length():
    assert [padded_width(n, 16, 128) for n in (1, 16, 17, 100, 120, 128)] == [16, 16, 32, 112, 128, 128]
    assert padded_width(120, 100, 128) == 128      # rounded to 200 would pass max_length: capped there
    assert padded_width(37, 0, 128) == 37          # 0: the batch's longest row, as before


def test_pad_multiple_defaults_to_16_on_a_gpu_and_off_on_the_cpu():
    for device, expected in (("cpu", 0), ("cuda", 16)):
        assert resolve_pad_multiple(None, torch.device(device)) == expected
    assert resolve_pad_multiple(0, torch.device("cuda")) == 0  # the switch


def test_choose_widths_takes_a_few_from_the_data():
    assert choose_widths([5, 66, 40], 128) == (32, 64, 80)  # SST's longest row, 66 tokens
    assert choose_widths([3, 9], 128) == (16,)
    assert choose_widths([300], 128) == (32, 64, 128)  # never past max_length


def test_a_fixed_width_is_the_smallest_that_holds_the_row_from_both_sides():
    """With the recorded step's widths (32, 64, 80): a row of 32 takes 32 and one of 33 takes 64, 64 and 65 take
    64 and 80; a row longer than every width falls back to the rounding rule; a row past max_length keeps its
    length (it is longer than a row may be, never cut here)."""
    widths = (32, 64, 80)
    assert [padded_width(n, 16, 128, widths) for n in (1, 32, 33, 64, 65, 80)] == [32, 32, 64, 64, 80, 80]
    assert padded_width(81, 16, 128, widths) == 96 and padded_width(81, 0, 128, widths) == 81
    assert padded_width(129, 16, 128) == 129 and padded_width(127, 16, 128) == 128
    assert resolve_pad_multiple(8, torch.device("cpu")) == 8  # asked for: taken on any device


def test_the_widths_at_a_power_of_two_and_a_max_length_off_the_multiple():
    """A longest row of exactly 64 needs no width past 64; one of 65 adds 80 (65 rounded up to 16); with
    --max_length 100 a row of 300 is cut to 100, the last width 100, not 112."""
    assert choose_widths([64], 128) == (32, 64)
    assert choose_widths([65], 128) == (32, 64, 80)
    assert choose_widths([32], 128) == (32,)
    assert choose_widths([300], 100) == (32, 64, 100)
    assert choose_widths([20], 128, smallest=8) == (8, 16, 32)
    assert choose_widths([], 128) == (16,)  # no rows: one width of a row of 1, rounded
