"""tasks/nsp.py: pairs of spans built as BERT's pretraining data is: A and B consecutive sentences, a following B
continuing A in its document and a random B running on in another, every sentence in exactly one A or following B,
spans filling the length, about half of each label; the seed fixes the pairs; held-out documents are whole and
apart; a review splits into its sentences; text too thin for the task is one line."""
import numpy as np
import pytest

from minbert.tasks.nsp import IS_NEXT, NOT_NEXT, segment_pairs, split_documents, split_sentences
from utils import MinbertError


def documents():
    """Sentences that say where they are: 'd3s4' is the fifth sentence of the fourth document; documents of one to
    nine sentences."""
    return [[f"d{d}s{i}" for i in range(1 + d % 9)] for d in range(60)]


def where(span):
    """[(document, sentence)] of a span's sentences."""
    return [(int(w[1:].split("s")[0]), int(w.split("s")[1])) for w in span.split()]


def one_token(sentence):
    return 1


def test_spans_follow_bert_and_cover_every_sentence_once():
    docs = documents()
    pairs = segment_pairs(docs, 3, one_token, 6)
    used = []
    for a, b, label in pairs:
        sa, sb = where(a), where(b)
        for span in (sa, sb):  # consecutive sentences of one document
            assert len({d for d, _ in span}) == 1 and [i for _, i in span] == list(range(span[0][1], span[-1][1] + 1))
        if label == IS_NEXT:
            assert sb[0] == (sa[-1][0], sa[-1][1] + 1)  # B goes on where A stops
            used += sa + sb
        else:
            assert sb[0][0] != sa[0][0]  # from another document
            used += sa
    assert sorted(used) == [(d, i) for d, doc in enumerate(docs) for i in range(len(doc))]  # each sentence once
    labels = [label for _, _, label in pairs]
    assert 0.35 < labels.count(NOT_NEXT) / len(labels) < 0.65
    long_docs = [(a, b) for a, b, label in pairs if label == IS_NEXT and len(docs[where(a)[0][0]]) == 9]
    assert max(len(where(a)) + len(where(b)) for a, b in long_docs) == 6  # a span fills the length
    assert any(len(where(a)) > 1 for a, _, _ in pairs)  # A holds several sentences where they fit
    assert segment_pairs(docs, 3, one_token, 6) == pairs and segment_pairs(docs, 4, one_token, 6) != pairs


def test_a_random_b_fills_the_room_a_leaves():
    """Sentences of 2 tokens, 10 for the pair: a NotNext B runs on until A and B hold at least the target (or its
    document ends), so a pair of short spans is rare, and B's first sentence is anywhere in its document."""
    docs = [[f"d{d}s{i}" for i in range(12)] for d in range(20)]
    pairs = segment_pairs(docs, 0, lambda s: 2, 10, short_prob=0.0)
    random = [(where(a), where(b)) for a, b, label in pairs if label == NOT_NEXT]
    assert random and all(2 * (len(sa) + len(sb)) >= 10 or sb[-1][1] == 11 for sa, sb in random)
    assert len({sb[0][1] for _, sb in random}) > 3


def test_held_out_documents_are_whole_and_apart():
    docs = [[f"d{d}s{i}" for i in range(3)] for d in range(100)]
    train, dev = split_documents(docs, 11711)
    assert len(dev) == 5 and len(train) == 95
    assert not {s for doc in dev for s in doc} & {s for doc in train for s in doc}
    assert sorted(map(tuple, train + dev)) == sorted(map(tuple, docs))
    few = split_documents(docs[:4], 0)
    assert [len(p) for p in few] == [2, 2]  # at least 2 each side
    pairs = segment_pairs(dev, 11711, one_token, 6)
    assert {where(b)[0][0] for _, b, _ in pairs} <= {where(doc[0])[0][0] for doc in dev}  # B's from held-out docs
    labels = [label for _, _, label in segment_pairs(train, 11711, one_token, 6)]
    assert 0.35 < np.mean(labels) < 0.65


def test_text_too_thin_for_the_task_is_one_line():
    with pytest.raises(MinbertError, match=r"^texts.txt: no document has two sentences, so no sentence has a next "
                                           r"one to predict: --nsp takes documents of several sentences"):
        split_documents([["one"], ["two"], ["three"], ["four"]], 0, "texts.txt")
    with pytest.raises(MinbertError, match=r"^texts.txt: 3 document\(s\); --nsp holds out whole documents \(at least 2\)"):
        split_documents([["one", "two"], ["three"], ["four"]], 0, "texts.txt")
    with pytest.raises(MinbertError, match=r"^texts.txt: one document has two sentences or more, and --nsp needs one on "
                                           r"each side"):
        split_documents([["one", "two"], ["three"], ["four"], ["five"]], 0, "texts.txt")


@pytest.mark.parametrize("seed", range(12))
def test_each_part_keeps_a_document_with_a_next_sentence(seed):
    """Two documents of two sentences among many of one: whatever the seed, each side of the split gets one, so that
    neither side's pairs are all NotNext; the split still holds every document once."""
    docs = [["a1", "a2"], ["b1", "b2"]] + [[f"s{i}"] for i in range(40)]
    train, dev = split_documents(docs, seed)
    assert any(len(d) > 1 for d in train) and any(len(d) > 1 for d in dev)
    assert sorted(map(tuple, train + dev)) == sorted(map(tuple, docs)) and len(dev) == 2


def test_a_review_splits_into_its_sentences():
    review = ('I was never quite sure where this was going . These people seem interested ! Why ? " Quite " he said . '
              'It costs 2 dollars , etc . , etc . 10/10')
    assert split_sentences(review) == ["I was never quite sure where this was going .", "These people seem interested !",
                                       "Why ?", '" Quite " he said .', "It costs 2 dollars , etc . , etc .", "10/10"]


def test_a_random_span_stops_as_soon_as_it_fills_its_room_and_never_comes_from_its_own_document():
    """Sentences of 2 tokens: room 4 takes exactly 2 sentences, room 5 three, room 1 one (at least one), unless the
    document ends first; whatever the draw, never document d."""
    from minbert.tasks.nsp import random_span
    docs = [[f"d{d}s{i}" for i in range(30)] for d in range(3)]
    for room, n in ((4, 2), (5, 3), (1, 1), (0, 1), (6, 3)):
        for seed in range(20):
            for d in range(3):
                span = random_span(docs, d, room, np.random.default_rng(seed), lambda s: 2)
                at = where(" ".join(span))
                assert at[0][0] != d
                assert len(span) == min(n, 30 - at[0][1]), (room, seed, d)
    seen = {where(random_span(docs, 1, 4, np.random.default_rng(s), lambda s: 2)[0])[0][0] for s in range(40)}
    assert seen == {0, 2}  # both other documents drawn


@pytest.mark.parametrize("n,held", [(4, 2), (5, 2), (40, 2), (60, 3), (100, 5), (1000, 50)])
def test_five_percent_of_the_documents_are_held_out_at_least_two_and_two_left_to_train(n, held):
    docs = [[f"d{d}s{i}" for i in range(2)] for d in range(n)]
    train, dev = split_documents(docs, 0)
    assert (len(train), len(dev)) == (n - held, held)


def test_a_short_target_is_drawn_from_two_up_to_the_length():
    """short_prob 1: every span aims at a length drawn from 2 to max_tokens (6), both ends drawn; 0: always 6."""
    docs = [[f"d{d}s{i}" for i in range(40)] for d in range(30)]
    sizes = {len(where(a)) + len(where(b)) for a, b, label in segment_pairs(docs, 5, one_token, 6, short_prob=1.0)
             if label == IS_NEXT}
    assert sizes == {2, 3, 4, 5, 6}
    full = {len(where(a)) + len(where(b)) for a, b, label in segment_pairs(docs, 5, one_token, 6, short_prob=0.0)
            if label == IS_NEXT and where(b)[-1][1] < 39}
    assert full == {6}
