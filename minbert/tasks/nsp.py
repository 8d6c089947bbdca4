"""Next-sentence prediction's sentence pairs (Devlin et al. 2019, section 3.1, "Task #2: Next Sentence
Prediction (NSP)"), for pretrain.py --nsp (pipelines/pretrain.py; the head is in tasks/mlm.py).

"When choosing the sentences A and B for each pretraining example, 50% of the time B is the actual next
sentence that follows A (labeled as IsNext), and 50% of the time it is a random sentence from the corpus
(labeled as NotNext)." Here every sentence that has a next one in its document is an A once; half of the
A's, drawn at random, keep their next sentence, the other half get a sentence drawn from another document
(a document uniformly, then a sentence of it uniformly), as the paper's create_pretraining_data.py draws
its random B. The
pairs are built once from the seed, as that script builds its data once; the masking is drawn anew each epoch.
Each pair goes in as `[CLS] A [SEP] B [SEP]`, token type 0 up to the first [SEP] and 1 after it, as Part 2's
cross-encoded pairs do (datasets.TaskData).

Labels follow HF's BertForPreTraining: 0 for IsNext, 1 for NotNext.
"""
import re

import numpy as np

from minbert.course_data import Task
from utils import MinbertError

IS_NEXT, NOT_NEXT = 0, 1
PAIRS = Task("nsp", ("sentence_a", "sentence_b"), "is_random", "class", 2)

# A sentence ends at . ! or ? (a run of them) followed by space and then what starts a sentence: a capital or
# a digit, maybe after an opening quote or bracket. A rule of thumb ("Dr. Seuss" splits, "etc . , etc ." does
# not); a --texts file of one sentence a line says exactly where sentences end.
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?\s*[A-Z0-9])")


def split_sentences(text):
    """The sentences of a review, in order."""
    return [s.strip() for s in SENTENCE_END.split(text.strip()) if s.strip()]


def sentence_pairs(documents, seed, where="the text"):
    """[(A, B, label)] of `documents` (lists of sentences, in order): see the module's docstring. Documents of
    one sentence give no A, but can give a random B. Text without a document of two sentences, or of one
    document only, is refused in one line naming `where` it comes from."""
    documents = [doc for doc in documents if doc]
    if not any(len(doc) > 1 for doc in documents):
        raise MinbertError(f"{where}: no document has two sentences, so no sentence has a next one to "
                           "predict: --nsp takes documents of several sentences (in a --texts file, one "
                           "sentence a line and a blank line between documents)")
    if len(documents) < 2:
        raise MinbertError(f"{where}: one document only, and --nsp draws its random (NotNext) sentences "
                           "from another document: give at least two (in a --texts file, a blank line "
                           "between them)")
    # A stream of its own: drawn from default_rng(seed), the NotNext labels would follow the permutation that
    # split_texts draws from the same seed for a list of the same length, and the held-out pairs would all be
    # NotNext.
    rng = np.random.default_rng([seed, 1])
    firsts = [(d, i) for d, doc in enumerate(documents) for i in range(len(doc) - 1)]
    labels = np.full(len(firsts), IS_NEXT)
    labels[rng.permutation(len(firsts))[:len(firsts) // 2]] = NOT_NEXT
    pairs = []
    for (d, i), label in zip(firsts, labels):
        if label == IS_NEXT:
            b = documents[d][i + 1]
        else:
            other = rng.integers(len(documents) - 1)
            other += other >= d  # any document but A's
            b = documents[other][rng.integers(len(documents[other]))]
        pairs.append((documents[d][i], b, int(label)))
    return pairs
