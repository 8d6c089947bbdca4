"""Next-sentence prediction's sentence pairs (Devlin et al. 2019, section 3.1, "Task #2: Next Sentence
Prediction (NSP)"), for pretrain.py --nsp (pipelines/pretrain.py; the head is in tasks/mlm.py).

"When choosing the sentences A and B for each pretraining example, 50% of the time B is the actual next
sentence that follows A (labeled as IsNext), and 50% of the time it is a random sentence from the corpus
(labeled as NotNext)." A "sentence" there is a span of text, not a linguistic sentence: BERT's pretraining
data fills each example with as many consecutive sentences as fit its length (appendix A.2; the reference
create_pretraining_data.py), and so does segment_pairs here. Walking each document, it gathers consecutive
sentences until they reach the target length (`max_tokens`, or with probability 0.1 a shorter one drawn
uniformly from 2 up, so that short inputs are seen too), cuts the gathered span at a random sentence boundary
into A and the rest, and makes B either that rest (IsNext) or, half the time, consecutive sentences of another
document from a random start, as many as fill the length left (NotNext); the sentences of the span not used then
start the next span. A span of one sentence (a long one, or a document's last) takes the next sentence as its
IsNext B where there is one, and a random B where there is none. A pair still longer than fits is cut by the
tokenizer (the longer side first). The held-out pairs come from documents of their own (split_documents), their
random B's from those documents too, so that no held-out pair shares text with a training one. Each pair goes
in as `[CLS] A [SEP] B [SEP]`, token type 0 up to the first [SEP] and 1 after it, as Part 2's cross-encoded
pairs do (datasets.TaskData); the pairs are built once from the seed, as the reference builds its data once,
and the masking is drawn anew each epoch.

Labels follow HF's BertForPreTraining: 0 for IsNext, 1 for NotNext.
"""
import re

import numpy as np

from minbert.cli import MinbertError
from minbert.course_data import Task

IS_NEXT, NOT_NEXT = 0, 1
PAIRS = Task("nsp", ("sentence_a", "sentence_b"), "is_random", "class", 2)

# A sentence ends at . ! or ? (a run of them) followed by space and then what starts a sentence: a capital or
# a digit, maybe after an opening quote or bracket. A rule of thumb ("Dr. Seuss" splits, "etc . , etc ." does
# not); a --texts file of one sentence a line says exactly where sentences end.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?\s*[A-Z0-9])")


def split_sentences(text):
    """The sentences of a review, in order."""
    return [s.strip() for s in SENTENCE_END.split(text.strip()) if s.strip()]


def split_documents(documents, seed, where="the text", held_out=0.05):
    """(training documents, held-out documents): a random 5% of the documents (at least 2, so that a held-out
    pair's random B comes from another held-out document) held out whole, each part with a document of two
    sentences or more (without one, every pair of that part would be NotNext). Fewer than 4 documents, or fewer
    than two of two sentences, is one line naming `where` the text comes from."""
    documents = [doc for doc in documents if doc]
    if not any(len(doc) > 1 for doc in documents):
        raise MinbertError(f"{where}: no document has two sentences, so no sentence has a next one to "
                           "predict: --nsp takes documents of several sentences (in a --texts file, one "
                           "sentence a line and a blank line between documents)")
    if len(documents) < 4:
        raise MinbertError(f"{where}: {len(documents)} document(s); --nsp holds out whole documents (at least 2) "
                           "and trains on the others (at least 2), each NotNext sentence drawn from another "
                           "document of its part: give at least 4 (in a --texts file, a blank line between them)")
    several = [i for i, doc in enumerate(documents) if len(doc) > 1]
    if len(several) < 2:
        raise MinbertError(f"{where}: one document has two sentences or more, and --nsp needs one on each side of "
                           "its held-out split (the other side's pairs would all be NotNext): give at least two")
    n_dev = min(len(documents) - 2, max(2, int(round(held_out * len(documents)))))
    order = list(np.random.default_rng([seed, 2]).permutation(len(documents)))
    for part, other in ((slice(0, n_dev), slice(n_dev, None)), (slice(n_dev, None), slice(0, n_dev))):
        if not set(order[part]) & set(several):  # swap in the other part's first such document (it has two)
            i = next(k for k in range(len(order))[other] if order[k] in several)
            j = range(len(order))[part][-1]
            order[i], order[j] = order[j], order[i]
    return [documents[i] for i in order[n_dev:]], [documents[i] for i in order[:n_dev]]


def segment_pairs(documents, seed, length, max_tokens, short_prob=0.1):
    """[(A, B, label)] of `documents` (lists of sentences, in order, at least two documents), A and B each one
    or more consecutive sentences joined by spaces, built as the module's docstring says. `length(sentence)`
    is its number of tokens; `max_tokens` what A and B may hold together."""
    rng = np.random.default_rng([seed, 1])

    def target():
        return max_tokens if rng.random() >= short_prob else int(rng.integers(2, max_tokens + 1))
    pairs = []
    for d, doc in enumerate(documents):
        span, size, goal, i = [], 0, target(), 0
        while i < len(doc):
            span.append(doc[i])
            size += length(doc[i])
            if i == len(doc) - 1 or size >= goal:
                cut = int(rng.integers(1, len(span))) if len(span) > 1 else 1
                a = span[:cut]
                follows = rng.random() >= 0.5
                if follows and len(span) == 1 and i + 1 < len(doc):  # one long sentence: B is the next one
                    i += 1
                    span.append(doc[i])
                if not follows or len(span) == 1:  # the document's last sentence alone has no next one
                    label, b = NOT_NEXT, random_span(documents, d, goal - sum(map(length, a)), rng, length)
                    i -= len(span) - cut  # the sentences after the cut start the next span
                else:
                    label, b = IS_NEXT, span[cut:]
                pairs.append((" ".join(a), " ".join(b), label))
                span, size, goal = [], 0, target()
            i += 1
    return pairs


def random_span(documents, d, room, rng, length):
    """Consecutive sentences of a document other than `d`, from a random one on, as many as fill `room` tokens
    (at least one)."""
    other = int(rng.integers(len(documents) - 1))
    other += other >= d
    doc = documents[other]
    start = int(rng.integers(len(doc)))
    span = [doc[start]]
    size = length(doc[start])
    for sentence in doc[start + 1:]:
        if size >= room:
            break
        span.append(sentence)
        size += length(sentence)
    return span
