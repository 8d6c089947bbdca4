"""Part 2 of Build GPT-2 (handout section 7): fine-tune on Shakespeare's sonnets, then complete held-out ones.

Training is next-token prediction (handout section 5.1): the mean cross-entropy of each token given the ones
before it, padding left out. The dev score is the perplexity of the true held-out dev sonnets (exp of that
mean, lower is better; fit keeps the epoch of the highest score, so the score is its negative).

Completion: each held-out sonnet's first three lines are the prompt; the model writes the other eleven
one line at a time, sampling with temperature and top-p, greedily, or by beam search (generation.py), each
line ending at the first newline or after `max_line_tokens` tokens (LineRule), so that every completion has
the sonnet's 14 lines (a beam's hypothesis finishes where its last line ends);
`check_prompts` refuses, before training, held-out sonnets that already have them and models whose
positions cannot hold a prompt and its remaining lines at that length. The key-value cache carries over
from line to line. The dev completions are scored with chrF (Popovic 2015) against the true sonnets, with
the sacrebleu package, as the course scores them."""
import math
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

from evaluation import predict
from gpt2.generation import beam_search, stream
from gpt2.models.gpt2 import GPT2Model
from minbert.cli import MinbertError
from minbert.course_data import read_sonnets  # noqa: F401 (the GPT-2 scripts read the sonnets from here)
from minbert.objectives.losses import TermLoss

LINES = 14
PROMPT_LINES = 3  # the lines of each sonnet a held-out file gives (the course's sonnets_held_out*.txt)


class SonnetGPT(nn.Module):
    """GPT-2 with its LM head, for the sonnets (the handout's SonnetGPT)."""

    @property
    def backbone(self):
        """The pretrained network inside (the backbone contract: bert.py BertModel.layers, .embeddings)."""
        return self.gpt

    def __init__(self, pretrained, attn="sdpa"):
        super().__init__()
        self.gpt = GPT2Model.from_pretrained(pretrained, attn_impl=attn)

    def forward(self, input_ids, attention_mask):
        """Logits over the vocabulary at every position [B, T, V] (through GPT-2's forward, which --compile
        compiles; generation runs `encode` with its cache instead)."""
        return self.gpt.hidden_state_to_token(self.gpt(input_ids, attention_mask)["last_hidden_state"])


def token_nll(model, x):
    """The next-token cross-entropy at each position of a batch's inputs `x` [B, T - 1] (position t predicts
    token t + 1; 0 where that token is padding), and the mask of the real ones."""
    logits = model(x["input_ids"], x["attention_mask"])[:, :-1]
    mask = x["attention_mask"][:, 1:]
    return F.cross_entropy(logits.float().transpose(1, 2), x["input_ids"][:, 1:],
                           reduction="none") * mask, mask


def lm_loss(model, batch):
    """Mean next-token cross-entropy over the real tokens of a batch (a fixed-shape batch's filler rows left
    out: minbert/objectives/rows.py)."""
    nll, mask = token_nll(model, batch["x"])
    if "weight" in batch:
        w = batch["weight"][:, None]
        nll, mask = nll * w.to(nll.dtype), mask * w.to(mask.dtype)
    return nll.sum() / mask.sum().clamp(min=1)


class LanguageModelLoss(TermLoss):
    """lm_loss as the Trainer takes a loss (minbert/objectives/losses.py TermLoss)."""

    def forward(self, model, batch):
        return lm_loss(model, batch)


@torch.no_grad()
def perplexity(model, data, device, amp="none", batch_size=8):
    """exp of the mean next-token cross-entropy over every real token of `data` (evaluation.predict's loop:
    each row's summed cross-entropy and token count, one copy to the host at the end)."""
    model.eval()
    sums = predict(lambda b: torch.stack([t.sum(1).float() for t in token_nll(model, b["x"])], dim=1), data,
                   batch_size, device, amp, desc="dev perplexity")
    return math.exp(sums[:, 0].sum() / max(sums[:, 1].sum(), 1.0))


def check_true_dev(dev_path, true_path):
    """Refuse in one line, before any training, a held-out dev file none of whose sonnets has its true sonnet
    (by number) in the true dev file: chrF against no reference is undefined, not 0."""
    dev, true = read_sonnets(dev_path), dict(read_sonnets(true_path))
    if dev and not any(n in true for n, _ in dev):
        raise MinbertError(f"--held_out_dev_path {dev_path}, --true_dev_path {true_path}: none of the {len(dev)} "
                           f"dev sonnets (numbers {', '.join(str(n) for n, _ in dev[:3])}, ...) has its true "
                           "sonnet in the true file, so their chrF is undefined: give the dev prompts and the "
                           "true dev sonnets that go together (the course's sonnets_held_out_dev.txt and "
                           "TRUE_sonnets_held_out_dev.txt)")


def check_prompts(sonnets, where, tokenizer, limit, max_line_tokens, no_repeat_ngram_size=0):
    """Refuse in one line, before any training, held-out sonnets [(number, prompt)] (or [(number, prompt,
    their file)], several files at once: the advice then holds for all of them) that `complete` cannot bring
    to LINES lines: one that has them all already (a file of whole sonnets where their first lines belong), or
    prompts that leave too few of the model's `limit` positions for the lines still to write at up to
    `max_line_tokens` tokens each (a completion would stop short, and the submission's check refuse the
    file); and a `no_repeat_ngram_size` longer than any sonnet completed from them, which would never act."""
    fits = []
    for number, prompt, *file in sonnets:
        where = file[0] if file else where
        text = prompt.rstrip("\n") + "\n"
        have = text.count("\n")
        if have >= LINES:
            raise MinbertError(f"{where}: sonnet {number} has {have} lines already, so nothing is left to "
                               f"complete: a held-out file holds the first {PROMPT_LINES} lines of each "
                               "sonnet (as the course's sonnets_held_out.txt does), not whole sonnets")
        tokens = len(tokenizer.encode(text))
        fits.append(((limit - tokens) // (LINES - have), number, tokens, LINES - have, where))
    fit, number, tokens, rest, where = min(fits)
    if fit < 1:
        raise MinbertError(f"{where}: sonnet {number}'s first lines are {tokens} tokens, which leave "
                           f"{max(limit - tokens, 0)} of the model's {limit} positions for its {rest} "
                           "further lines: completing it needs a model with "
                           "more positions (n_positions in its config.json)")
    if fit < max_line_tokens:
        raise MinbertError(f"--max_line_tokens {max_line_tokens}: sonnet {number} of {where} ({tokens} "
                           f"tokens) and its {rest} further lines fit the model's {limit} positions only at "
                           f"up to {fit} tokens a line: give --max_line_tokens {fit} (or a model with more "
                           f"positions), so that every completion has {LINES} lines")
    longest = max(min(limit, tokens + rest * max_line_tokens) for _, _, tokens, rest, _ in fits)
    if no_repeat_ngram_size > longest:
        raise MinbertError(f"--no_repeat_ngram_size {no_repeat_ngram_size}: longer than any sonnet this run "
                           f"writes (at most {longest} tokens, its first lines and the rest at up to "
                           f"--max_line_tokens {max_line_tokens} a line), so it would never act")


class LineRule:
    """The completion rule, one token at a time: a line ends at its first line break after some text, or after
    `max_line_tokens` tokens; a line break before any text starts the line again (the file holds no empty
    line); <|endoftext|> is no text, but counts; a line with no printable text is an ellipsis. Called as
    beam_search's `ends` is, rule(state, token) returns the new state and whether all `lines` lines are
    written; a state is (the lines written, the tokens of the line being written, the tokens that line has
    taken), None before the first token."""

    def __init__(self, tokenizer, lines, max_line_tokens):
        self.tokenizer, self.lines, self.max_line_tokens = tokenizer, lines, max_line_tokens

    def piece(self, line):
        """The text of a line's tokens, up to its first line break."""
        return printable(self.tokenizer.decode(list(line)).split("\n")[0])

    def __call__(self, state, token):
        written, line, taken = state or ((), (), 0)
        taken += 1
        ended = False
        if token != self.tokenizer.eos_token_id:
            line += (token,)
            if token in self.tokenizer.newline_ids:
                ended = bool(self.piece(line))
                line = line if ended else ()  # a line break before any text: go on
        if ended or taken == self.max_line_tokens:
            written, line, taken = written + (self.piece(line) or "\u2026",), (), 0
        return (written, line, taken), len(written) == self.lines

    def text(self, state):
        """The `lines` lines of a completion that stopped in `state` (the model's positions ran out, or the
        search's last step came): the line begun is kept, and each one missing is an ellipsis."""
        written, line, _ = state or ((), (), 0)
        if len(written) < self.lines:
            written += (self.piece(line) or "\u2026",)
        return list(written) + ["\u2026"] * (self.lines - len(written))


@torch.no_grad()
def complete(model, tokenizer, prompt, temperature=1.2, top_p=0.9, max_line_tokens=24, generator=None,
             device="cpu", num_beams=0, length_penalty=1.0, no_repeat_ngram_size=0, early_stopping=False):
    """`prompt` (a sonnet's first lines) continued to LINES lines by LineRule, sampled (greedy at temperature
    0), or with `num_beams` above 0 by beam search, a hypothesis finishing where its last line ends."""
    model.eval()
    gpt, limit = model.gpt, model.gpt.config.max_position_embeddings
    text = prompt.rstrip("\n") + "\n"
    ids = torch.tensor([tokenizer.encode(text)], device=device)
    if ids.shape[1] >= limit:
        raise MinbertError(f"a prompt of {ids.shape[1]} tokens leaves none "
                           f"of the model's {limit} positions to write in")
    rule = LineRule(tokenizer, LINES - text.count("\n"), max_line_tokens)
    if num_beams:
        longest = min(limit - ids.shape[1], rule.lines * max_line_tokens)
        tokens = beam_search(gpt, ids, longest, num_beams, length_penalty, no_repeat_ngram_size, ends=rule,
                             early_stopping=early_stopping)[0, ids.shape[1]:].tolist()
    else:  # one cache across all the lines, nothing once the positions run out
        tokens = stream(gpt, ids, temperature, top_p, generator=generator)
    state = None
    for token in tokens:
        state, done = rule(state, int(token))
        if done:
            break
    return "\n".join(text.rstrip("\n").split("\n") + rule.text(state))


def printable(piece):
    """`piece` without control characters (some, \\x1c or \\x85, are line breaks to a reader of the file), stripped."""
    return "".join(c for c in piece if c.isprintable()).strip()


def write_sonnets(path, sonnets):
    """The handout's file: a title line, then each sonnet after a line with its number."""
    Path(path).write_text("--Generated Sonnets--\n\n" + "".join(f"\n{n}\n{text}\n" for n, text in sonnets))
    return Path(path)
