"""tasks/nsp.py: half the pairs follow and half do not, the held-out ones too; a following B is A's next sentence in
A's document, a random B comes from another document; every sentence with a next one is an A once; the seed fixes the
pairs; a review
splits into its sentences; text with no document of two sentences, or one document only, is one line."""
import pytest

from minbert.tasks.nsp import IS_NEXT, NOT_NEXT, sentence_pairs, split_sentences
from utils import MinbertError


def documents():
    """Sentences that say where they are: 'd3 s4' is the fifth sentence of the fourth document; documents of
    one to nine sentences."""
    return [[f"d{d} s{i}" for i in range(1 + d % 9)] for d in range(60)]


def where(sentence):
    d, i = sentence.split()
    return int(d[1:]), int(i[1:])


def test_half_follow_half_do_not_and_no_pair_crosses_a_document_when_it_should_not():
    docs = documents()
    pairs = sentence_pairs(docs, seed=3)
    assert sorted(where(a) for a, _, _ in pairs) == [(d, i) for d, doc in enumerate(docs) for i in range(len(doc) - 1)]
    labels = [label for _, _, label in pairs]
    assert labels.count(NOT_NEXT) == len(pairs) // 2 and labels.count(IS_NEXT) == len(pairs) - len(pairs) // 2
    for a, b, label in pairs:
        (da, ia), (db, ib) = where(a), where(b)
        if label == IS_NEXT:
            assert (db, ib) == (da, ia + 1)
        else:
            assert db != da
    assert any(len(docs[where(b)[0]]) == 1 for _, b, label in pairs if label == NOT_NEXT)  # from any document
    assert sentence_pairs(docs, seed=3) == pairs and sentence_pairs(docs, seed=4) != pairs


def test_the_held_out_pairs_are_half_random_too():
    """The pipeline holds out 5% of the pairs with the run's seed (pipelines/pretrain.py split_texts): both labels
    are among them, as often as in the rest (the pairs' labels are drawn from a stream of their own)."""
    from minbert.pipelines.pretrain import split_texts
    docs = [[f"d{d} s{i}" for i in range(12)] for d in range(100)]
    for seed in (0, 11711):
        train, dev = split_texts(sentence_pairs(docs, seed), seed)
        for part in (train, dev):
            share = sum(label == NOT_NEXT for _, _, label in part) / len(part)
            assert 0.35 < share < 0.65, (seed, len(part), share)


def test_a_review_splits_into_its_sentences():
    review = ('I was never quite sure where this was going . These people seem interested ! Why ? " Quite " he said . '
              'It costs 2 dollars , etc . , etc . 10/10')
    assert split_sentences(review) == ["I was never quite sure where this was going .", "These people seem interested !",
                                       "Why ?", '" Quite " he said .', "It costs 2 dollars , etc . , etc .", "10/10"]


def test_text_without_a_next_sentence_to_predict_is_one_line():
    with pytest.raises(MinbertError, match=r"^texts.txt: no document has two sentences, so no sentence has a next "
                                           r"one to predict: --nsp takes documents of several sentences"):
        sentence_pairs([["one"], ["two"], ["three"]], 0, "texts.txt")
    with pytest.raises(MinbertError, match=r"^texts.txt: one document only, and --nsp draws its random"):
        sentence_pairs([["one", "two", "three"], []], 0, "texts.txt")
