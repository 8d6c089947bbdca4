"""tools/sonnet_decoding.py: each decoding's chrF from one trained checkpoint; its top-p figure is the one the run
printed (the same sampling, seed and chrF); one beam scores as greedy decoding does; another command's checkpoint is
one line."""
import pytest

from gpt2.flags import parse_sonnets, sonnet_settings
from gpt2.sonnet_pipeline import run_sonnets
from minbert.runs.checkpoint import load_checkpoint, save_checkpoint
from tests.checkpoints import make_gpt2_checkpoint
from tests.gpt2.test_sonnet_pipeline import sonnet_argv, sonnet_files
from tools import sonnet_decoding
from utils import MinbertError


def test_each_decodings_chrf_from_one_checkpoint(tmp_path):
    model = make_gpt2_checkpoint(tmp_path / "m", n_positions=512)
    files = sonnet_files(tmp_path / "data")
    result = run_sonnets(sonnet_settings(parse_sonnets(sonnet_argv(tmp_path, model, files))))
    r = sonnet_decoding.main([str(tmp_path / "run" / "sonnet.pt"), "--held_out_dev_path",
                              str(files / "sonnets_held_out_dev.txt"), "--true_dev_path",
                              str(files / "TRUE_sonnets_held_out_dev.txt"), "--max_line_tokens", "6",
                              "--beams", "1", "2", "--json", str(tmp_path / "chrf.json")])
    chrf = r["chrf"]
    assert list(chrf) == ["greedy", "top-p (temperature 1.2, p 0.9, seed 11711)",
                          "beam search K=1 (length penalty 1, early_stopping false)",
                          "beam search K=2 (length penalty 1, early_stopping false)"]
    assert chrf["top-p (temperature 1.2, p 0.9, seed 11711)"] == pytest.approx(result["dev_chrf"])
    assert chrf["greedy"] == chrf["beam search K=1 (length penalty 1, early_stopping false)"]
    assert (tmp_path / "chrf.json").is_file()
    state = load_checkpoint(tmp_path / "run" / "sonnet.pt")
    save_checkpoint(tmp_path / "other.pt", {**state, "pipeline": "multitask"})
    with pytest.raises(MinbertError, match=r"other.pt: not a sonnet_generation.py checkpoint \(its pipeline is "
                                           r"'multitask'\)"):
        sonnet_decoding.main([str(tmp_path / "other.pt")])


def test_decoding_values_no_sampler_takes_and_dev_files_that_do_not_pair_are_one_line(tmp_path):
    """As sonnet_generation.py refuses them: before the checkpoint is read."""
    files = sonnet_files(tmp_path / "data")
    for argv, match in ((["--max_line_tokens", "0"], r"--max_line_tokens: 0 must be an integer >= 1"),
                        (["--temperature", "0"], r"--temperature: 0 must be a number > 0"),
                        (["--top_p", "2"], r"--top_p: 2 must be a share in \(0, 1\]")):
        with pytest.raises(MinbertError, match=match):
            sonnet_decoding.main([str(tmp_path / "none.pt"), *argv])
    from gpt2.sonnets import check_true_dev
    check_true_dev(files / "sonnets_held_out_dev.txt", files / "TRUE_sonnets_held_out_dev.txt")
    with pytest.raises(MinbertError, match=r"none of the \d+ dev sonnets .* has its true sonnet in the true file, so "
                                           r"their chrF is undefined"):
        check_true_dev(files / "sonnets_held_out_dev.txt", files / "sonnets.txt")
