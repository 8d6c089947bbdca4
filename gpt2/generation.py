"""Text generation for GPT2Model: greedy, temperature and top-p (nucleus) sampling, or beam search, with a
key-value cache.

The starter's loop feeds the whole sequence through the model for every new token: step t costs a forward pass
over t tokens. With the cache (modules/attention.py) the prompt is encoded once and each step runs the model
on one token, attending to the cached keys and values; the logits are the same, so greedy decoding gives the
same tokens (tests/gpt2/test_generation.py checks it against the uncached loop and HF's generate).

Top-p (Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration"): sample from the smallest set of
tokens whose probabilities sum to at least p, renormalised; temperature divides the logits first.

Beam search (Jurafsky and Martin, Speech and Language Processing, section 10.4; the oracle is HF
transformers' `generate(num_beams=K, early_stopping=...)`, each of its three stopping rules,
tests/gpt2/test_generation.py): the K best partial sequences by the sum of their tokens' log-probabilities,
kept as K rows of one batch. Each step scores every next token of every row and takes the best continuations
of all rows together (2K, or K more for each end token, so that K unfinished ones remain even if every row's
best continuation ends). One that ends (an end token, a caller's rule, the last step) becomes a finished
hypothesis if it ranks among the first K, scored by its sum over its length (new tokens only) to the power
`length_penalty` (above 0 favours longer ones); the best K finished ones are kept, and the best K unfinished
ones go on. A row's keys and values in the cache are its parent row's, so the cache is reordered by the
parents' indices, never recomputed. The search ends at `max_new_tokens`, or earlier by `early_stopping`, HF's
rule and default:
  - False (HF's default): once K have finished and the best unfinished one, scored at its present length,
    could no longer beat the worst of them;
  - True: as soon as K have finished;
  - "never": as False, but with a length penalty above 0 the unfinished one is scored at the longest length it
    could reach, so that the search goes on while a longer hypothesis could still win.
One beam is greedy decoding, as HF's generate(num_beams=1) is: the search ends when its one hypothesis does,
whatever the rule (each rule weighs K finished hypotheses against unfinished ones, and at one beam the only one
left unfinished is the runner-up of the step that ended, which greedy decoding never takes). It returns the best
finished one. `no_repeat_ngram_size` n forbids a token that would complete an n-gram its row holds already (the
prompt's included).
"""
import itertools
import math

import torch

# beam search's stopping rules, HF's generate(early_stopping=...) values
EARLY_STOPPING = (False, True, "never")


def next_token(logits, temperature=1.0, top_p=1.0, generator=None):
    """One token id per row from logits [B, V]: argmax at temperature 0, else a top-p sample."""
    if temperature == 0:
        return logits.argmax(-1)
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        # keep a token while the mass before it is below p: the first token always stays
        keep = (sorted_probs.cumsum(-1) - sorted_probs) < top_p
        sorted_probs = sorted_probs * keep
        probs = torch.zeros_like(probs).scatter(-1, order, sorted_probs)
    return torch.multinomial(probs / probs.sum(-1, keepdim=True), 1, generator=generator).squeeze(-1)


@torch.no_grad()
def stream(model, input_ids, temperature=0.0, top_p=1.0, use_cache=True, generator=None):
    """The one decoding loop: yield the next token ids [B] after `input_ids`, one at a time, for as long as
    the caller takes them and the model's positions last. A token is run through the model only when the
    caller asks for the one after it, so stopping costs nothing extra."""
    limit = model.config.max_position_embeddings
    if input_ids.shape[1] > limit:
        raise ValueError(f"a prompt of {input_ids.shape[1]} tokens exceeds the model's {limit} positions")
    ids, new, past = input_ids, input_ids, None
    while True:
        if use_cache:
            hidden, past = model.encode(new, past=past)
        else:
            hidden, _ = model.encode(ids)
        token = next_token(model.hidden_state_to_token(hidden[:, -1]), temperature, top_p, generator)
        yield token
        ids, new = torch.cat([ids, token[:, None]], dim=1), token[:, None]
        if ids.shape[1] > limit:  # the next token would need a position the model does not have
            return


def generate(model, input_ids, max_new_tokens, temperature=0.0, top_p=1.0, use_cache=True, eos_token_id=None,
             generator=None):
    """`input_ids` [1, T] (one unpadded prompt) continued by up to `max_new_tokens` tokens; stops after
    `eos_token_id`. Returns the whole sequence [1, T + n]."""
    limit = model.config.max_position_embeddings
    if input_ids.shape[1] + max_new_tokens > limit:
        raise ValueError(f"a prompt of {input_ids.shape[1]} tokens plus {max_new_tokens} "
                         f"new ones exceeds the model's {limit} positions")
    new = []
    for token in itertools.islice(stream(model, input_ids, temperature, top_p, use_cache, generator),
                                  max_new_tokens):
        new.append(token)
        if eos_token_id is not None and (token == eos_token_id).all():
            break
    return torch.cat([input_ids, torch.stack(new, dim=1)], dim=1) if new else input_ids


def reorder(past, rows):
    """The cache `past` with its batch rows taken as `rows` [R] says: row i's keys and values become those of
    row rows[i] (a beam's are its parent's, the first step's one row each beam's)."""
    return [(k.index_select(0, rows), v.index_select(0, rows)) for k, v in past]


def repeated_ngrams(seqs, n, vocab_size):
    """Bool [rows, vocab_size]: the tokens that would complete, at the end of each row of `seqs` [rows, T], an
    n-gram the row already holds (every n-gram whose first n - 1 tokens are the row's last n - 1)."""
    banned = torch.zeros(seqs.shape[0], vocab_size, dtype=torch.bool, device=seqs.device)
    length = seqs.shape[1]
    if not n or length < n:
        return banned
    grams = seqs.unfold(1, n, 1)  # every n-gram so far: [rows, length - n + 1, n]
    tail = seqs[:, length - n + 1:]  # what the next token would follow: [rows, n - 1]
    hit = (grams[:, :, :-1] == tail[:, None, :]).all(-1)
    row, gram = hit.nonzero(as_tuple=True)
    banned[row, grams[row, gram, -1]] = True
    return banned


@torch.no_grad()
def beam_search(model, input_ids, max_new_tokens, num_beams, length_penalty=1.0, no_repeat_ngram_size=0,
                eos_token_id=None, ends=None, use_cache=True, early_stopping=False):
    """`input_ids` [1, T] (one unpadded prompt) continued by beam search (the module's docstring) with
    `num_beams` beams for up to `max_new_tokens` tokens. A hypothesis ends with `eos_token_id` (an id or a
    list of them), and where `ends(state, token)` says: given a hypothesis' state (None at the start) and
    its next token, it returns the new state and whether the hypothesis ends there. `early_stopping` is HF's:
    False, True or "never" (one beam ends at its first end whatever it says). Returns the best finished sequence
    [1, T + n]. `use_cache=False` runs every row's whole sequence each step (the cache's check)."""
    limit = model.config.max_position_embeddings
    if input_ids.shape[0] != 1:
        raise ValueError(f"{input_ids.shape[0]} prompts: beam search continues one prompt ([1, T]) at a time")
    if input_ids.shape[1] + max_new_tokens > limit:
        raise ValueError(f"a prompt of {input_ids.shape[1]} tokens plus {max_new_tokens} "
                         f"new ones exceeds the model's {limit} positions")
    if num_beams < 1:
        raise ValueError(f"num_beams {num_beams}: beam search needs at least one beam")
    if not math.isfinite(length_penalty):
        raise ValueError(f"length_penalty {length_penalty}: not a number beam search can rank by")
    if no_repeat_ngram_size > input_ids.shape[1] + max_new_tokens:
        raise ValueError(f"no_repeat_ngram_size {no_repeat_ngram_size}: longer than any sequence this search "
                         f"writes ({input_ids.shape[1]} + {max_new_tokens} tokens), so it would never act")
    if not (isinstance(early_stopping, bool) or early_stopping == "never"):  # 1 == True, but 1 is no rule of HF's
        raise ValueError(f"early_stopping {early_stopping!r}: one of False, True, 'never' (HF's)")
    # one beam is greedy decoding: once its hypothesis ends, what would go on is a token greedy decoding passed over,
    # and "never" would score it at the longest length and follow it (HF's generate runs no stopping rule there)
    rule = early_stopping if num_beams > 1 else True
    eos = set([eos_token_id] if isinstance(eos_token_id, int) else eos_token_id or [])
    width = max(2, 1 + len(eos)) * num_beams  # continuations looked at each step
    seqs, new, past = input_ids, input_ids, None
    scores = torch.zeros(1, device=input_ids.device)  # each row's sum of log-probabilities (fp32)
    states = [None]
    finished = []  # (score, sequence), best first, at most num_beams
    for step in range(1, max_new_tokens + 1):
        if use_cache:
            hidden, past = model.encode(new, past=past)
        else:
            hidden, _ = model.encode(seqs)
        logp = torch.log_softmax(model.hidden_state_to_token(hidden[:, -1]).float(), dim=-1)
        vocab = logp.shape[-1]
        if no_repeat_ngram_size:
            logp = logp.masked_fill(repeated_ngrams(seqs, no_repeat_ngram_size, vocab), -math.inf)
        top, index = (scores[:, None] + logp).view(-1).topk(min(width, logp.numel()))
        normalized = top / (step ** length_penalty)  # a finished hypothesis' score
        going = []  # (rank, state) of the continuations that go on
        for rank, (i, parent) in enumerate(zip(index.tolist(), (index // vocab).tolist())):
            if rank >= num_beams and len(going) == num_beams:  # none of the rest can finish or go on
                break
            token = i % vocab
            state, done = ends(states[parent], token) if ends is not None else (None, False)
            if done or token in eos or step == max_new_tokens:
                if rank < num_beams:  # only the first K continuations may finish (HF's rule)
                    sequence = torch.cat([seqs[parent], index.new_tensor([token])])
                    finished.append((float(normalized[rank]), sequence))
            elif len(going) < num_beams:
                going.append((rank, state))
        finished = sorted(finished, key=lambda f: -f[0])[:num_beams]
        if not going or (len(finished) == num_beams and (rule is True or not improvable(
                float(top[going[0][0]]), finished[-1][0], step, max_new_tokens, length_penalty, rule))):
            break
        ranks = torch.tensor([r for r, _ in going], device=index.device)
        rows, tokens = index[ranks] // vocab, index[ranks] % vocab
        seqs = torch.cat([seqs[rows], tokens[:, None]], dim=1)
        scores, states = top[ranks], [state for _, state in going]
        if use_cache:
            past, new = reorder(past, rows), tokens[:, None]
    return finished[0][1][None]


def improvable(best_going, worst_finished, step, max_new_tokens, length_penalty, early_stopping):
    """Whether the best unfinished hypothesis (its sum of log-probabilities `best_going` after `step` new
    tokens) could still beat the worst of K finished ones: HF's rule, scoring it at its present length, or
    with early_stopping "never" and a length penalty above 0 at the longest length it could reach."""
    length = max_new_tokens if early_stopping == "never" and length_penalty > 0 else step
    return best_going / length ** length_penalty > worst_finished
