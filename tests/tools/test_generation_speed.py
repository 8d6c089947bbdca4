"""tools/generation_speed.py: the three ways of generating are timed on one model and give the same tokens; with
--beams, beam search ours and HF's too, agreeing for each K; --beams 0 is one line."""
import pytest

from utils import MinbertError
from tools import generation_speed


def test_the_three_generators_are_timed_and_agree(tmp_path):
    r = generation_speed.main(["--shape", "tiny", "--prompt", "4", "--new", "8", "--repeats", "1", "--json",
                               str(tmp_path / "g.json")])
    assert r["same_tokens"] and len(r["runs"]) == 3
    assert all(x["tokens_per_s"] > 0 for x in r["runs"].values())
    assert (tmp_path / "g.json").is_file()


def test_beam_search_is_timed_against_hf_for_each_k(tmp_path):
    r = generation_speed.main(["--shape", "tiny", "--prompt", "4", "--new", "8", "--repeats", "1", "--beams", "1", "3"])
    assert r["same_tokens"] and r["beams"] == [1, 3] and len(r["runs"]) == 3 + 2 * 2
    assert "ours, beam search K=3 (key-value cache)" in r["runs"] and "HF transformers generate num_beams=3" in r["runs"]
    for k in ("0", "129"):
        with pytest.raises(MinbertError, match=rf"argument --beams: {k} must be a number of beams from 1 to 128"):
            generation_speed.main(["--shape", "tiny", "--beams", "2", k])
    with pytest.raises(MinbertError, match=r"argument --beams: expected at least one argument"):  # (had timed none)
        generation_speed.main(["--shape", "tiny", "--beams"])


@pytest.mark.parametrize("argv, match", [
    (["--new", "0"], r"argument --new: 0 must be an integer >= 1"), (["--repeats", "0"], r"--repeats: 0 must be"),
    (["--prompt", "0"], r"--prompt: 0 must be"), (["--new", "-1"], r"--new: -1 must be"),
    (["--prompt", "100000", "--new", "4"], r"--prompt 100000 --new 4: 100004 tokens, beyond the tiny shape's 128 "
                                           r"positions")])
def test_sizes_no_run_can_take_are_one_line_before_any_model_is_built(argv, match):
    with pytest.raises(MinbertError, match=match):
        generation_speed.main(["--shape", "tiny", *argv])
