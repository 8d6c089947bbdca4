"""gpt2/generation.py: greedy decoding with the key-value cache gives the uncached loop's tokens and HF's
generate's, token for token; top-p keeps the smallest set of tokens reaching p; temperature divides the logits;
the stream runs until the last position has predicted its token. Beam search returns HF's generate(num_beams=K,
early_stopping=True) tokens for K 2 and 4, two length penalties, with and without n-gram blocking and an end token,
on several prompts, with and without the cache; without reordering the cache by beam it would not; one beam is
greedy decoding under every stopping rule, as HF's generate at one beam, while at several "never" goes on where True
stops; a repeated n-gram is found wherever it is."""
import pytest
import torch

import gpt2.generation as generation
from gpt2.generation import beam_search, generate, next_token, repeated_ngrams
from gpt2.models.gpt2 import GPT2Model
from tests.processes import DEVICES


@pytest.mark.parametrize("device", DEVICES)
def test_greedy_with_and_without_cache_equals_hf_generate(tiny_gpt2, device):
    from transformers import GPT2LMHeadModel
    theirs = GPT2LMHeadModel.from_pretrained(tiny_gpt2).to(device).eval()
    ours = GPT2Model.from_pretrained(tiny_gpt2).to(device).eval()
    for seed in range(3):
        torch.manual_seed(seed)
        prompt = torch.randint(1, ours.config.vocab_size, (1, 6)).to(device)
        cached = generate(ours, prompt, 30)
        uncached = generate(ours, prompt, 30, use_cache=False)
        hf = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=30, do_sample=False,
                             eos_token_id=None, pad_token_id=0)
        assert cached.tolist() == uncached.tolist() == hf.tolist()


def test_top_p_samples_only_from_the_nucleus():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    g = torch.Generator().manual_seed(0)
    drawn = {next_token(logits, 1.0, 0.7, g).item() for _ in range(300)}
    assert drawn == {0, 1}  # 0.5 + 0.3 reaches 0.7; 2 and 3 are never drawn
    assert next_token(logits, 0.0).item() == 0
    assert {next_token(logits, 1.0, 1.0, g).item() for _ in range(300)} == {0, 1, 2, 3}


def test_a_prompt_too_long_for_the_positions_is_refused(tiny_gpt2):
    model = GPT2Model.from_pretrained(tiny_gpt2).eval()
    with pytest.raises(ValueError, match="exceeds the model's 64 positions"):
        generate(model, torch.zeros(1, 60, dtype=torch.long), 10)


def test_temperature_divides_the_logits_and_top_p_stops_once_p_is_reached():
    """At temperature 2 the draws follow softmax(logits / 2); a nucleus that reaches p exactly with its first
    token is that token alone (the smallest set whose mass is at least p)."""
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.1]]))
    g = torch.Generator().manual_seed(0)
    draws = torch.stack([next_token(logits.expand(1000, -1), 2.0, 1.0, g) for _ in range(4)]).flatten()
    expected = torch.softmax(logits[0] / 2.0, -1)  # 0.47, 0.33, 0.19 (at temperature 1: 0.6, 0.3, 0.1)
    torch.testing.assert_close(torch.bincount(draws, minlength=3) / draws.numel(), expected, atol=0.02, rtol=0)
    half = torch.log(torch.tensor([[0.5, 0.25, 0.25]]))
    assert {next_token(half, 1.0, 0.5, g).item() for _ in range(100)} == {0}
    assert {next_token(half, 1.0, 0.51, g).item() for _ in range(300)} == {0, 1}  # 0.75 reaches 0.51


def test_the_stream_runs_until_the_last_position_has_predicted_its_token(tiny_gpt2):
    """A model of 64 positions continues a 60-token prompt by 5 tokens: the fifth is predicted at position 63,
    as HF's model predicts it from the 64 tokens before it."""
    from transformers import GPT2LMHeadModel
    from gpt2.generation import stream
    ours = GPT2Model.from_pretrained(tiny_gpt2).eval()
    prompt = torch.randint(1, ours.config.vocab_size, (1, 60), generator=torch.Generator().manual_seed(0))
    tokens = list(stream(ours, prompt))
    assert len(tokens) == 5
    seen = torch.cat([prompt, torch.stack(tokens[:4], dim=1)], dim=1)
    with torch.no_grad():
        assert GPT2LMHeadModel.from_pretrained(tiny_gpt2).eval()(seen).logits[0, -1].argmax() == tokens[-1]


def beam_cases(model, device):
    """Four prompts, each with its end token: none, or the token greedy decoding writes sixth (so that beams meet
    it, and hypotheses of different lengths compete), or first (for the tiny checkpoint, a prompt on which HF's
    early_stopping True and False part: K hypotheses end at once, and a longer one later scores higher)."""
    g = torch.Generator().manual_seed(1)
    cases = []
    for length, with_eos in ((4, False), (7, True), (10, True)):
        prompt = torch.randint(1, model.config.vocab_size, (1, length), generator=g).to(device)
        eos = int(generate(model, prompt, 6)[0, -1]) if with_eos else None
        cases.append((prompt, eos))
    prompt = torch.tensor([[292, 186, 16, 117, 312, 252, 241]], device=device)
    return cases + [(prompt, int(generate(model, prompt, 1)[0, -1]))]


@pytest.mark.parametrize("device", DEVICES)
def test_beam_search_equals_hf_generate(tiny_gpt2, device):
    """Every combination of K 2 and 4, length penalty -1, 1 and 2, n-gram blocking off and 2, and each of HF's
    three early_stopping rules (False, its default, True and "never"): the same token ids as HF's generate, with
    the cache and without it. Without an end token every hypothesis runs to the last length, where neither the
    penalty nor the stopping rule can change a thing: that prompt takes K and the blocking alone. The grid is no
    degenerate one: the length penalty, the blocking, K and the stopping rule each change some result."""
    from transformers import GPT2LMHeadModel
    theirs = GPT2LMHeadModel.from_pretrained(tiny_gpt2).to(device).eval()
    ours = GPT2Model.from_pretrained(tiny_gpt2).to(device).eval()
    results = {}
    for i, (prompt, eos) in enumerate(beam_cases(ours, device)):
        for k in (2, 4):
            for penalty in ((1.0, -1.0, 2.0) if eos is not None else (1.0,)):
                for n in (0, 2):
                    for stop in ((False, True, "never") if eos is not None else (False,)):
                        hf = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=16,
                                             num_beams=k, do_sample=False, length_penalty=penalty,
                                             no_repeat_ngram_size=n, early_stopping=stop, eos_token_id=eos,
                                             pad_token_id=0).tolist()
                        case = (i, k, penalty, n, stop)
                        assert beam_search(ours, prompt, 16, k, penalty, n, eos, early_stopping=stop).tolist() == hf, case
                        results[case] = hf
                    assert beam_search(ours, prompt, 16, k, penalty, n, eos, use_cache=False,
                                       early_stopping=stop).tolist() == hf

    def changes(position, a, b):
        """Whether setting `position` of the case (1 K, 2 penalty, 3 blocking, 4 rule) from a to b changes some
        result."""
        def swap(case, value):
            return case[:position] + (value,) + case[position + 1:]
        return any(results[swap(c, a)] != results[swap(c, b)] for c in results
                   if swap(c, a) in results and swap(c, b) in results)
    assert changes(2, 1.0, -1.0) and changes(3, 0, 2) and changes(1, 2, 4) and changes(4, True, False)
    assert beam_search(ours, prompt, 16, 2, 2.0, 0, eos).tolist() == results[3, 2, 2.0, 0, False]  # HF's default


def test_the_stopping_rules_score_the_best_unfinished_hypothesis_as_hf_does():
    """improvable(best, worst, step, max, penalty, rule), by hand: at the present length for False (HF's default),
    at the longest reachable length for "never" with a penalty above 0 (a longer hypothesis may still win), and at
    the present length again for "never" with a penalty of 0 or below."""
    from gpt2.generation import improvable
    # -4 after 2 of 16 tokens, penalty 2: -1 at its length, -4 / 256 at the longest; the worst finished -0.5
    assert not improvable(-4.0, -0.5, 2, 16, 2.0, False)
    assert improvable(-4.0, -0.5, 2, 16, 2.0, "never")
    assert not improvable(-4.0, -0.5, 2, 16, 0.0, "never") and not improvable(-4.0, -0.5, 2, 16, -1.0, "never")
    assert improvable(-0.9, -1.0, 3, 16, 0.0, False) and not improvable(-1.0, -1.0, 3, 16, 0.0, False)  # ties stop


def test_beam_search_refuses_what_it_cannot_do_as_asked(tiny_gpt2):
    """Two prompts at once (it would return one), a NaN length penalty (nothing to rank by), an n-gram longer than
    any sequence it writes (it would never act) and a stopping rule HF does not have: each a ValueError."""
    ours = GPT2Model.from_pretrained(tiny_gpt2).eval()
    prompt = torch.tensor([[5, 6, 7]])
    with pytest.raises(ValueError, match="2 prompts: beam search continues one prompt"):
        beam_search(ours, torch.cat([prompt, prompt]), 4, 2)
    with pytest.raises(ValueError, match="length_penalty nan: not a number"):
        beam_search(ours, prompt, 4, 2, float("nan"))
    with pytest.raises(ValueError, match=r"no_repeat_ngram_size 8: longer than any sequence this search writes "
                                         r"\(3 \+ 4 tokens\)"):
        beam_search(ours, prompt, 4, 2, no_repeat_ngram_size=8)
    assert beam_search(ours, prompt, 4, 2, no_repeat_ngram_size=7).shape[1] <= 7  # the longest it writes: taken
    with pytest.raises(ValueError, match="early_stopping 'always': one of False, True, 'never'"):
        beam_search(ours, prompt, 4, 2, early_stopping="always")
    for lookalike in (1, 0, 0.0):  # equal to True or False, but no rule of HF's: refused, not run as another one
        with pytest.raises(ValueError, match=f"early_stopping {lookalike!r}: one of False, True, 'never'"):
            beam_search(ours, prompt, 4, 2, early_stopping=lookalike)


def test_without_reordering_the_cache_by_beam_the_tokens_differ(tiny_gpt2, monkeypatch):
    """The check above has teeth: a cache whose rows stay where they were (row i keeps row i's keys and values,
    the first step's one row copied to every beam) gives other tokens than HF's for some prompt."""
    from transformers import GPT2LMHeadModel
    theirs = GPT2LMHeadModel.from_pretrained(tiny_gpt2).eval()
    ours = GPT2Model.from_pretrained(tiny_gpt2).eval()
    real = generation.reorder
    monkeypatch.setattr(generation, "reorder", lambda past, rows: real(
        past, torch.arange(len(rows)).clamp(max=past[0][0].shape[0] - 1)))
    g = torch.Generator().manual_seed(0)
    differ = 0
    for _ in range(6):
        prompt = torch.randint(1, ours.config.vocab_size, (1, 5), generator=g)
        hf = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=16, num_beams=4,
                             do_sample=False, early_stopping=True, eos_token_id=None, pad_token_id=0)
        differ += beam_search(ours, prompt, 16, 4).tolist() != hf.tolist()
        assert beam_search(ours, prompt, 16, 4, use_cache=False).tolist() == hf.tolist()  # no cache, no harm
    assert differ


def test_one_beam_is_greedy_decoding_and_ends_at_the_end_token_whatever_the_stopping_rule(tiny_gpt2):
    """At one beam HF's generate is greedy decoding, which ends at the first end token: so does beam search under
    each stopping rule and length penalty, "never" with a penalty above 0 too (which would otherwise score the
    runner-up token at the longest length and follow it). Each prompt with an end token meets it before the last
    of the 16 steps, so stopping there is what is tested."""
    from transformers import GPT2LMHeadModel
    theirs = GPT2LMHeadModel.from_pretrained(tiny_gpt2).eval()
    ours = GPT2Model.from_pretrained(tiny_gpt2).eval()
    for prompt, eos in beam_cases(ours, "cpu"):
        greedy = generate(ours, prompt, 16, eos_token_id=eos).tolist()
        if eos is not None:
            assert greedy[0][-1] == eos and len(greedy[0]) < prompt.shape[1] + 16
        for penalty in (1.0, -1.0, 2.0):
            for stop in (False, True, "never"):
                hf = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=16, num_beams=1,
                                     do_sample=False, length_penalty=penalty, early_stopping=stop, eos_token_id=eos,
                                     pad_token_id=0).tolist()
                assert beam_search(ours, prompt, 16, 1, penalty, 0, eos, early_stopping=stop).tolist() == hf \
                    == greedy, (eos, penalty, stop)
    with pytest.raises(ValueError, match="num_beams 0: beam search needs at least one beam"):
        beam_search(ours, prompt, 4, 0)


def test_never_at_several_beams_goes_on_where_true_stops(tiny_gpt2):
    """The other side of one beam's greedy ending: at 2, 3 and 4 beams "never" is still HF's "never", and on the
    prompt where K hypotheses end at once (the fourth case) it goes on past them at 2 beams, penalty 2, to a
    16-token hypothesis, where True stops with the 7-token one it has."""
    from transformers import GPT2LMHeadModel
    theirs = GPT2LMHeadModel.from_pretrained(tiny_gpt2).eval()
    ours = GPT2Model.from_pretrained(tiny_gpt2).eval()
    prompt, eos = beam_cases(ours, "cpu")[3]
    lengths = {}
    for k in (2, 3, 4):
        for stop in (True, "never"):
            hf = theirs.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=16, num_beams=k,
                                 do_sample=False, length_penalty=2.0, early_stopping=stop, eos_token_id=eos,
                                 pad_token_id=0).tolist()
            assert beam_search(ours, prompt, 16, k, 2.0, 0, eos, early_stopping=stop).tolist() == hf, (k, stop)
            lengths[k, stop] = len(hf[0]) - prompt.shape[1]
    assert lengths[2, True] == 7 and lengths[2, "never"] == 16


def test_repeated_ngrams_are_found_wherever_they_are():
    """Row 0 ends in (5, 6), which came before followed by 7 and by 9: with n = 3 both are banned; with n = 2 every
    token that followed a 6 (4 too); with n = 1 every token seen. Row 1 repeats nothing but for n = 1."""
    seqs = torch.tensor([[5, 6, 7, 2, 6, 4, 5, 6, 9, 5, 6], list(range(1, 12))])
    banned = lambda n: [row.nonzero().flatten().tolist() for row in repeated_ngrams(seqs, n, 12)]  # noqa: E731
    assert banned(3) == [[7, 9], []]
    assert banned(2) == [[4, 7, 9], []]
    assert banned(1) == [[2, 4, 5, 6, 7, 9], list(range(1, 12))]
    assert banned(12) == [[], []]  # no 12-gram yet


def test_repeated_ngrams_equal_a_count_by_hand_at_every_length():
    """Against the rule written out by hand, on random rows of every length from 0 to 9 (a row as long as n, one
    token longer, one shorter) and n from 1 to 4: token t is banned when (last n - 1 tokens, t) is an n-gram
    already in the row."""
    g = torch.Generator().manual_seed(0)
    for length in range(10):
        seqs = torch.randint(0, 4, (6, length), generator=g)  # 4 tokens: repeats are common
        for n in range(1, 5):
            banned = repeated_ngrams(seqs, n, 4)
            for row, seq in zip(banned, seqs.tolist()):
                grams = {tuple(seq[i:i + n]) for i in range(len(seq) - n + 1)}
                tail = tuple(seq[len(seq) - n + 1:]) if n > 1 else ()
                expected = {t for t in range(4) if len(seq) >= n and tail + (t,) in grams}
                assert set(row.nonzero().flatten().tolist()) == expected, (seq, n)


def test_generate_fills_the_positions_exactly_stops_after_the_end_token_and_takes_zero_new_tokens(tiny_gpt2):
    """A 60-token prompt takes 4 new tokens on a model of 64 positions, not 5; the sequence ends with the end token
    the first time greedy decoding writes it (the token itself kept); no new token returns the prompt."""
    model = GPT2Model.from_pretrained(tiny_gpt2).eval()
    prompt = torch.randint(1, model.config.vocab_size, (1, 60), generator=torch.Generator().manual_seed(2))
    full = generate(model, prompt, 4)
    assert full.shape == (1, 64) and torch.equal(full[:, :60], prompt)
    with pytest.raises(ValueError, match="a prompt of 60 tokens plus 5 new ones exceeds the model's 64 positions"):
        generate(model, prompt, 5)
    short = prompt[:, :8]
    free = generate(model, short, 6)[0, 8:].tolist()
    eos = free[2]
    stopped = generate(model, short, 6, eos_token_id=eos)[0, 8:].tolist()
    assert stopped == free[:free.index(eos) + 1]
    assert torch.equal(generate(model, short, 0), short)


def test_beam_search_ends_where_its_rule_says_fills_the_positions_exactly_and_needs_a_beam(tiny_gpt2):
    """`ends` ending every hypothesis at its second new token: the best sequence is the prompt plus 2, whatever
    max_new_tokens allows, and it is the best of the 2-token hypotheses by score (greedy's first two with one
    beam); a 60-token prompt takes 4 new tokens on 64 positions, not 5; 0 beams is refused, 1 taken."""
    model = GPT2Model.from_pretrained(tiny_gpt2).eval()
    prompt = torch.tensor([[5, 6, 7]])
    ends = lambda count, token: ((count or 0) + 1, (count or 0) + 1 == 2)  # noqa: E731
    out = beam_search(model, prompt, 6, 3, ends=ends)
    assert out.shape == (1, 5) and torch.equal(out[:, :3], prompt)
    assert torch.equal(beam_search(model, prompt, 6, 1, ends=ends), generate(model, prompt, 2))
    long_prompt = torch.randint(1, model.config.vocab_size, (1, 60), generator=torch.Generator().manual_seed(4))
    assert beam_search(model, long_prompt, 4, 2).shape[1] <= 64
    with pytest.raises(ValueError, match="a prompt of 60 tokens plus 5 new ones exceeds the model's 64 positions"):
        beam_search(model, long_prompt, 5, 2)
    with pytest.raises(ValueError, match="num_beams 0: beam search needs at least one beam"):
        beam_search(model, prompt, 4, 0)
