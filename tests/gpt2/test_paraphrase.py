"""gpt2/paraphrase.py: a pair becomes the handout's question; the logits are the LM head's for " no" and " yes"
(ids read from the tokenizer); only full-model trains."""
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
