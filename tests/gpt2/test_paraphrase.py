"""gpt2/paraphrase.py: a pair becomes the handout's question; the logits are the LM head's for " no" and " yes"
(ids read from the tokenizer), label 1 being " yes"; only full-model trains."""
import pytest
import torch

from gpt2.paraphrase import ANSWERS, GPT2ParaphraseCloze, cloze_examples
from gpt2.tokenizer import GPT2Tokenizer
from minbert.course_data import Example
from minbert.specs import ModelSpec
from utils import MinbertError


def test_the_prompt_and_the_answer_logits(tiny_gpt2):
    (e,) = cloze_examples([Example("a1", ("How do I cook rice?", "What is the way to cook rice?"), 1, 2)])
    assert e.texts == ('Is "What is the way to cook rice?" a paraphrase of "How do I cook rice?"? Answer yes or no:',)
    assert (e.id, e.label) == ("a1", 1)
    spec = ModelSpec(pipeline="gpt2-paraphrase", pretrained=str(tiny_gpt2), num_labels=2)
    model = GPT2ParaphraseCloze(spec).eval()
    tok = GPT2Tokenizer.from_pretrained(tiny_gpt2)
    batch = tok([e.texts[0], "love doth bear"], max_length=64)  # the tiny model has 64 positions
    with torch.no_grad():
        logits = model(batch["input_ids"], batch["attention_mask"])
        last = model.gpt(batch["input_ids"], batch["attention_mask"])["last_token"]
    ids = [tok.token_id(a) for a in ANSWERS]
    torch.testing.assert_close(logits, model.gpt.hidden_state_to_token(last)[:, ids])
    with pytest.raises(MinbertError, match="the cloze task trains the whole model"):
        GPT2ParaphraseCloze(ModelSpec(pipeline="gpt2-paraphrase", pretrained=str(tiny_gpt2),
                                      fine_tune_mode="last-linear-layer"))


def test_label_1_is_the_answer_yes(tiny_gpt2):
    """Column 1 of the logits (label 1, a paraphrase) is the LM head's " yes", column 0 its " no"; the raw output
    report.py reads is the log-odds of yes against no."""
    from gpt2.paraphrase import GPT2ParaphrasePipeline
    model = GPT2ParaphraseCloze(ModelSpec(pipeline="gpt2-paraphrase", pretrained=str(tiny_gpt2), num_labels=2)).eval()
    tok = GPT2Tokenizer.from_pretrained(tiny_gpt2)
    batch = tok(['Is "a" a paraphrase of "b"? Answer yes or no:'], max_length=64)
    with torch.no_grad():
        logits = model(batch["input_ids"], batch["attention_mask"])
        head = model.gpt.hidden_state_to_token(model.gpt(batch["input_ids"], batch["attention_mask"])["last_token"])
    torch.testing.assert_close(logits, head[:, [tok.token_id(" no"), tok.token_id(" yes")]])
    assert GPT2ParaphrasePipeline.raw_output(torch.tensor([[0.5, 2.0]])).tolist() == [1.5]


def test_a_vocabulary_splitting_an_answer_names_the_checkpoint_and_what_it_needs(tiny_gpt2, monkeypatch):
    def split(self, text):
        raise MinbertError(f"{text!r} is 2 tokens in this vocabulary, not one")
    monkeypatch.setattr(GPT2Tokenizer, "token_id", split)
    with pytest.raises(MinbertError, match=rf"^--pretrained {tiny_gpt2}: ' no' is 2 tokens in this vocabulary, not "
                                           r"one; the cloze task answers with one token each \(' no' and ' yes'\)"):
        GPT2ParaphraseCloze(ModelSpec(pipeline="gpt2-paraphrase", pretrained=str(tiny_gpt2)))
