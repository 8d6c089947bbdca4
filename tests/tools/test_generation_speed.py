"""tools/generation_speed.py: the three ways of generating are timed on one model and give the same tokens."""
from tools import generation_speed


def test_the_three_generators_are_timed_and_agree(tmp_path):
    r = generation_speed.main(["--shape", "tiny", "--prompt", "4", "--new", "8", "--repeats", "1", "--json",
                               str(tmp_path / "g.json")])
    assert r["same_tokens"] and len(r["runs"]) == 3
    assert all(x["tokens_per_s"] > 0 for x in r["runs"].values())
    assert (tmp_path / "g.json").is_file()
