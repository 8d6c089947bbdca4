"""gpt2/sonnets.py: the sonnet files are read by their numbers; the LM loss is HF's; a completion keeps its prompt
and has 14 lines, sampled with its temperature and top-p, or by beam search, whose hypothesis ends where its last line
does and whose one beam is greedy decoding."""
import math

import pytest
import torch

from gpt2.sonnets import LINES, SonnetGPT, complete, lm_loss, read_sonnets, write_sonnets
from gpt2.tokenizer import GPT2Tokenizer
from tests.checkpoints import make_gpt2_checkpoint

TITLE = "Sonnets\nby William Shakespeare\n\n\n\n"


def test_sonnets_are_read_by_their_numbers_and_written_back(tmp_path):
    path = tmp_path / "s.txt"
    path.write_text(TITLE + "1\n\nFrom fairest creatures\nWe desire increase,\n\n  2\nWhen forty winters\n")
    sonnets = read_sonnets(path)
    assert sonnets == [("1", "From fairest creatures\nWe desire increase,"), ("2", "When forty winters")]
    assert read_sonnets(write_sonnets(tmp_path / "out.txt", sonnets)) == sonnets


def test_the_loss_is_hfs_next_token_loss_over_real_tokens(tiny_gpt2):
    from transformers import GPT2LMHeadModel
    model, theirs = SonnetGPT(tiny_gpt2).eval(), GPT2LMHeadModel.from_pretrained(tiny_gpt2).eval()
    tok = GPT2Tokenizer.from_pretrained(tiny_gpt2)
    batch = tok(["love doth bear the rose", "time"])
    labels = batch["input_ids"].masked_fill(batch["attention_mask"] == 0, -100)
    with torch.no_grad():
        ours = lm_loss(model, {"x": batch})
        ref = theirs(batch["input_ids"], attention_mask=batch["attention_mask"], labels=labels).loss
    assert math.isclose(float(ours), float(ref), rel_tol=1e-5)


def test_a_completion_keeps_its_prompt_and_has_fourteen_lines(tmp_path):
    folder = make_gpt2_checkpoint(tmp_path / "m", n_positions=512)
    model, tok = SonnetGPT(folder).eval(), GPT2Tokenizer.from_pretrained(folder)
    prompt = "love doth bear the rose\nthe summer night\nthou art fair"
    g = torch.Generator().manual_seed(0)
    text = complete(model, tok, prompt, 1.0, 0.9, 8, g)
    assert text.startswith(prompt + "\n") and len(text.split("\n")) == LINES
    again = complete(model, tok, prompt, 1.0, 0.9, 8, torch.Generator().manual_seed(0))
    assert again == text  # one seed, one completion


def test_whole_sonnets_or_prompts_that_leave_too_few_positions_are_refused(tmp_path):
    from gpt2.sonnets import check_prompts
    from utils import MinbertError
    folder = make_gpt2_checkpoint(tmp_path / "m", n_positions=60)
    model, tok = SonnetGPT(folder).eval(), GPT2Tokenizer.from_pretrained(folder)
    prompt = "love doth bear the rose\nthe summer night\nthou art fair"
    whole = "\n".join([prompt] + ["time doth see"] * 11)
    with pytest.raises(MinbertError, match=r"held: sonnet 2 has 14 lines already, so nothing is left to complete: a "
                                           r"held-out file holds the first 3 lines of each sonnet"):
        check_prompts([("1", prompt), ("2", whole)], "held", tok, 60, 4)
    n = len(tok.encode(prompt + "\n"))
    fit = (60 - n) // 11
    with pytest.raises(MinbertError, match=rf"--max_line_tokens {fit + 1}: sonnet 1 of held \({n} tokens\) and its 11 "
                                           rf"further lines fit the model's 60 positions only at up to {fit} tokens a "
                                           rf"line: give --max_line_tokens {fit}"):
        check_prompts([("1", prompt)], "held", tok, 60, fit + 1)
    check_prompts([("1", prompt)], "held", tok, 60, fit)  # and at that length every completion has its 14 lines:
    for seed in range(3):
        text = complete(model, tok, prompt, 1.0, 1.0, fit, torch.Generator().manual_seed(seed))
        assert len(text.split("\n")) == LINES
    with pytest.raises(MinbertError, match=r"leave \d+ of the model's 20 positions for its 11 further lines: completing "
                                           r"it needs a model with more positions"):
        check_prompts([("1", prompt)], "held", tok, 20, 1)


def test_a_completion_samples_with_its_temperature_and_its_nucleus(tmp_path):
    """A nucleus of one token is the greedy choice at any temperature; the whole distribution at 1.2 is not."""
    folder = make_gpt2_checkpoint(tmp_path / "m", n_positions=512)
    model, tok = SonnetGPT(folder).eval(), GPT2Tokenizer.from_pretrained(folder)
    prompt = "love doth bear the rose\nthe summer night\nthou art fair"
    greedy = complete(model, tok, prompt, 0.0, 1.0, 8)
    assert complete(model, tok, prompt, 1.2, 1e-6, 8, torch.Generator().manual_seed(0)) == greedy
    assert complete(model, tok, prompt, 1.2, 1.0, 8, torch.Generator().manual_seed(0)) != greedy


def test_a_line_break_before_any_text_or_an_end_token_writes_no_empty_line(tmp_path, monkeypatch):
    """A completion always has LINES lines of text: a line break before any text does not end a line (the file
    could not hold an empty one), <|endoftext|> is not written, and a line given no text at all is an ellipsis."""
    import gpt2.sonnets as sonnets
    folder = make_gpt2_checkpoint(tmp_path / "m", n_positions=512)
    model, tok = SonnetGPT(folder).eval(), GPT2Tokenizer.from_pretrained(folder)
    newline, word = tok.encode("\n")[0], tok.encode(" rose")[0]
    script = [newline, word, newline, tok.eos_token_id, word, newline] + [newline] * 8 + [word, newline] * 20
    monkeypatch.setattr(sonnets, "stream", lambda *a, **kw: iter(torch.tensor(script)))
    prompt = "love doth bear the rose\nthe summer night\nthou art fair"
    lines = complete(model, tok, prompt, 1.0, 1.0, 8).split("\n")
    assert len(lines) == LINES and lines[3:5] == ["rose", "rose"] and lines[5] == "\u2026"
    assert all(line.strip() and "endoftext" not in line for line in lines)


def test_a_beam_completion_has_fourteen_lines_and_one_beam_is_greedy(tmp_path):
    """Beam search under the line rule: the best hypothesis stops at the token that ends its last line (the rule
    replayed over it says so there, and not before), the completion is the rule's lines, and with one beam it is
    the greedy completion; blocking repeated 2-grams changes it."""
    from gpt2.generation import beam_search
    from gpt2.sonnets import LineRule
    folder = make_gpt2_checkpoint(tmp_path / "m", n_positions=512)
    model, tok = SonnetGPT(folder).eval(), GPT2Tokenizer.from_pretrained(folder)
    prompt = "love doth bear the rose\nthe summer night\nthou art fair"
    text = complete(model, tok, prompt, max_line_tokens=8, num_beams=4)
    assert text.startswith(prompt + "\n") and len(text.split("\n")) == LINES
    ids = torch.tensor([tok.encode(prompt + "\n")])
    rule = LineRule(tok, LINES - 3, 8)
    tokens = beam_search(model.gpt, ids, 11 * 8, 4, ends=rule)[0, ids.shape[1]:].tolist()
    state, ends = None, []
    for token in tokens:
        state, done = rule(state, token)
        ends.append(done)
    assert ends == [False] * (len(tokens) - 1) + [True]
    assert text == "\n".join(prompt.split("\n") + rule.text(state))
    assert complete(model, tok, prompt, max_line_tokens=8, num_beams=1) == complete(model, tok, prompt, 0.0, 1.0, 8)
    assert complete(model, tok, prompt, max_line_tokens=8, num_beams=4, no_repeat_ngram_size=2) != text
