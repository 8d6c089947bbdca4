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
