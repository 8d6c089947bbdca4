"""flags/runtime_rows.py: the speed flags and the run folder's: inference takes only the speed flags that act
there, and the run folder's earlier spellings are taken but hidden from --help."""
import argparse

import pytest

from minbert.flag import G1, P1, P2
from minbert.flags import parsers, runtime_rows
from utils import MinbertError


def test_inference_takes_only_the_speed_flags_that_act_there():
    training, inference = parsers.parser("multitask"), parsers.parser("ensemble")
    assert {"bucket", "foreach", "compile", "grad_accum"} <= set(vars(training.parse_args([])))
    assert set(vars(inference.parse_args([]))) == {"amp", "attn", "pad_multiple"}
    with pytest.raises(MinbertError, match="unrecognized arguments: --compile"):
        inference.parse_args(["--compile"])


def test_the_run_folders_earlier_spellings_are_taken_and_hidden_from_help(tmp_path):
    """--checkpoint_dir (Part 1, Build GPT-2) and --checkpoint PATH (Part 2) name the run folder as --run_dir does,
    and --help does not show them; each script takes only its own."""
    hidden = {r.name: r for r in runtime_rows.run_rows() if r.help == argparse.SUPPRESS}
    assert set(hidden) == {"--checkpoint_dir", "--checkpoint"}
    for script in (P1, G1):
        assert parsers.parser(script).parse_args(["--checkpoint_dir", str(tmp_path)]).run_dir == str(tmp_path)
        assert "--checkpoint_dir" not in parsers.parser(script).format_help()
    args = parsers.parser(P2).parse_args(["--checkpoint", str(tmp_path / "best.pt")])
    assert (args.run_dir, args.checkpoint_name) == (str(tmp_path), "best")
    with pytest.raises(MinbertError, match="unrecognized arguments: --checkpoint_dir"):
        parsers.parser(P2).parse_args(["--checkpoint_dir", str(tmp_path)])
