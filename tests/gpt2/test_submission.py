"""gpt2/submission.py: a generated-sonnets file must complete every held-out sonnet in 14 lines."""
from gpt2.sonnets import write_sonnets
from gpt2.submission import sonnet_problem


def test_generated_sonnets_complete_every_held_out_one(tmp_path):
    (tmp_path / "sonnets_held_out.txt").write_text("Sonnets\n\n1\na\nb\nc\n\n2\nd\ne\nf\n")
    fourteen = "\n".join(f"line {i}" for i in range(14))
    ok = write_sonnets(tmp_path / "ok.txt", [("1", fourteen), ("2", fourteen)])
    assert sonnet_problem(ok, tmp_path) is None
    short = write_sonnets(tmp_path / "short.txt", [("1", fourteen), ("2", "just one line")])
    assert sonnet_problem(short, tmp_path) == "sonnet 2 is not 14 lines"
    other = write_sonnets(tmp_path / "other.txt", [("1", fourteen)])
    assert sonnet_problem(other, tmp_path) == "1 of sonnets_held_out.txt's 2 missing (first: 2)"
    more = write_sonnets(tmp_path / "more.txt", [("1", fourteen), ("3", fourteen)])
    assert sonnet_problem(more, tmp_path) == "1 of sonnets_held_out.txt's 2 missing (first: 2); 1 not in it (first: 3)"
    turned = write_sonnets(tmp_path / "turned.txt", [("2", fourteen), ("1", fourteen)])
    assert sonnet_problem(turned, tmp_path) == "its 2 sonnets in another order than sonnets_held_out.txt's"


def test_a_line_separator_inside_a_generated_line_is_part_of_it(tmp_path):
    """GPT-2's byte-level vocabulary can emit U+2028, \\x85 or a form feed: a line still ends at \\n only."""
    from gpt2.sonnets import read_sonnets
    (tmp_path / "sonnets_held_out.txt").write_text("Sonnets\n\n1\na\nb\nc\n")
    for char in ("\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"):
        lines = [f"line {i}" for i in range(14)]
        lines[3] = f"thy {char}beauty"
        path = write_sonnets(tmp_path / "gen.txt", [("1", "\n".join(lines))])
        assert read_sonnets(path) == [("1", "\n".join(lines))]
        assert sonnet_problem(path, tmp_path) is None
