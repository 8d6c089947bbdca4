"""Text generation for GPT2Model: greedy or temperature and top-p (nucleus) sampling, with a key-value cache.

The starter's loop feeds the whole sequence through the model for every new token: step t costs a forward pass
over t tokens. With the cache (modules/attention.py) the prompt is encoded once and each step runs the model
on one token, attending to the cached keys and values; the logits are the same, so greedy decoding gives the
same tokens (tests/gpt2/test_generation.py checks it against the uncached loop and HF's generate).

Top-p (Holtzman et al. 2020, "The Curious Case of Neural Text Degeneration"): sample from the smallest set of
tokens whose probabilities sum to at least p, renormalised; temperature divides the logits first."""
import itertools

import torch


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
