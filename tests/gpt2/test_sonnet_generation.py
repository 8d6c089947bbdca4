"""gpt2/sonnet_generation.py: the command, run from the gpt2 folder, fine-tunes, writes a 14-line completion of
every held-out sonnet to the handout's file and prints the dev chrF and perplexity."""
import re

from gpt2.sonnets import LINES, read_sonnets
from tests.checkpoints import make_gpt2_checkpoint
from tests.course import ROOT
from tests.gpt2.test_sonnet_pipeline import sonnet_argv, sonnet_files
from tests.processes import run_main


def test_the_command_completes_every_held_out_sonnet(tmp_path):
    model = make_gpt2_checkpoint(tmp_path / "m", n_positions=512)
    files = sonnet_files(tmp_path / "data")
    out = run_main("gpt2/sonnet_generation.py", *sonnet_argv(tmp_path, model, files), cwd=ROOT / "gpt2")
    assert out.returncode == 0, out.stderr[-3000:]
    assert re.search(r"dev perplexity [\d.]+, dev chrF [\d.]+ \(2 completions\)", out.stdout)
    assert "true dev sonnets; lr 0.001; run folder" in out.stdout  # the start line says the learning rate
    written = read_sonnets(tmp_path / "pred" / "generated_sonnets.txt")
    held = read_sonnets(files / "sonnets_held_out.txt")
    assert [n for n, _ in written] == [n for n, _ in held]
    for (_, text), (_, prompt) in zip(written, held):
        assert text.startswith(prompt) and len(text.split("\n")) == LINES
    assert (tmp_path / "run" / "generated_sonnets_dev.txt").is_file()
