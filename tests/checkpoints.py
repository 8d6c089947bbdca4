"""Tiny checkpoints and models: a BERT in HF's layout with its vocabulary, a GPT-2 in HF's layout with
its own BPE files, and the Part 1 and Part 2 models and batches built on them."""
import json
from pathlib import Path

import torch

from bert import BertModel
from config import BertConfig
from minbert.specs import ModelSpec
from minbert.tasks.sentiment import BertSentimentClassifier


WORDS = ("the a an movie film good bad great awful fun boring love hate is was it this that and but not "
         "very so funny sad plot actor acting story how what why do i can you my to of in on for with "
         "question answer same different dog cat man woman play playing run running ##s ##ing ##ed").split()


SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def tiny_config(**kw):
    base = dict(vocab_size=len(SPECIALS) + len(WORDS) + 26 + 10, hidden_size=32, num_hidden_layers=2,
                num_attention_heads=4, intermediate_size=64, max_position_embeddings=512)
    return BertConfig(**{**base, **kw})


def write_vocab(path):
    letters = list("abcdefghijklmnopqrstuvwxyz")
    tokens = SPECIALS + WORDS + letters + [f"##{c}" for c in "aeiosnrtly"]
    Path(path).write_text("\n".join(tokens) + "\n")
    return path


def hf_name(ours):
    """Our parameter name -> the HF checkpoint name, written out by hand (independent of base_bert)."""
    simple = {"word_embedding": "embeddings.word_embeddings", "pos_embedding": "embeddings.position_embeddings",
              "tk_type_embedding": "embeddings.token_type_embeddings", "embed_layer_norm": "embeddings.LayerNorm",
              "pooler_dense": "pooler.dense"}
    layer = {"self_attention.query": "attention.self.query", "self_attention.key": "attention.self.key",
             "self_attention.value": "attention.self.value", "attention_dense": "attention.output.dense",
             "attention_layer_norm": "attention.output.LayerNorm", "interm_dense": "intermediate.dense",
             "out_dense": "output.dense", "out_layer_norm": "output.LayerNorm"}
    mod, leaf = ours.rsplit(".", 1)
    if mod in simple:
        name = simple[mod]
    else:
        _, i, rest = mod.split(".", 2)
        name = f"encoder.layer.{i}.{layer[rest]}"
    if "LayerNorm" in name:  # old TF-converted checkpoints say gamma/beta
        leaf = {"weight": "gamma", "bias": "beta"}[leaf]
    return f"bert.{name}.{leaf}"


def make_hf_checkpoint(folder, config=None, seed=0, fmt="safetensors", extra_heads=True):
    """A tiny random BERT saved as the HF hub lays it out: config.json, vocab.txt, weights with the
    'bert.' prefix, gamma/beta names and a pretraining head we must ignore. Returns (folder, model)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    config = config or tiny_config()
    torch.manual_seed(seed)
    model = BertModel(config).eval()
    with torch.no_grad():  # non-trivial LayerNorms and biases, so a mix-up would show
        for n, p in model.named_parameters():
            if "layer_norm" in n or n.endswith("bias"):
                p.add_(torch.randn_like(p) * 0.1)
    sd = {hf_name(k): v.clone().contiguous() for k, v in model.state_dict().items()}
    if extra_heads:
        sd["cls.predictions.bias"] = torch.zeros(config.vocab_size)
        sd["bert.embeddings.position_ids"] = torch.arange(config.max_position_embeddings)[None]
    if fmt == "safetensors":
        from safetensors.torch import save_file
        save_file(sd, str(folder / "model.safetensors"))
    else:
        torch.save(sd, folder / "pytorch_model.bin")
    d = config.to_dict()
    d.update(architectures=["BertForPreTraining"], model_type="bert")
    (folder / "config.json").write_text(json.dumps(d))
    write_vocab(folder / "vocab.txt")
    return folder, model


def train_gpt2_vocab(folder, texts, vocab_size=400):
    """A byte-level BPE vocabulary (vocab.json, merges.txt) trained on `texts` with `tokenizers`, GPT-2's
    <|endoftext|> among its tokens: GPT-2's own vocabulary cannot be downloaded here."""
    from tokenizers import ByteLevelBPETokenizer
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=2, special_tokens=["<|endoftext|>"])
    Path(folder).mkdir(parents=True, exist_ok=True)
    tok.save_model(str(folder))
    return tok.get_vocab_size()


def make_gpt2_checkpoint(folder, seed=0, **shape):
    """An HF GPT2LMHeadModel with random weights, saved by transformers in HF's layout (config.json,
    model.safetensors) beside a vocabulary trained on sonnet-like lines; the folder. `shape` overrides the tiny
    default sizes (n_embd 32, 2 layers, 4 heads, 64 positions)."""
    from transformers import GPT2Config as HFConfig, GPT2LMHeadModel
    lines = [f"{w} {v} doth {u} the {w}'s fair {v}? Answer yes or no: {a}" for w in ("love", "time", "beauty", "thou")
             for v in ("rose", "summer", "night", "heart") for u in ("make", "bear", "see") for a in ("yes", "no")]
    vocab = train_gpt2_vocab(folder, lines * 3)
    torch.manual_seed(seed)
    config = HFConfig(**{**dict(vocab_size=vocab, n_positions=64, n_embd=32, n_layer=2, n_head=4, eos_token_id=0,
                               bos_token_id=0), **shape})
    GPT2LMHeadModel(config).eval().save_pretrained(folder)
    return Path(folder)


SENTIMENT_IDS = torch.tensor([[2, 7, 9, 11, 3, 0], [2, 12, 13, 14, 15, 3]])


def sentiment_model(tiny_model, dropout):
    """A Part 1 model of the tiny checkpoint in training mode, every dropout (BERT's and the head's) at `dropout`."""
    model = BertSentimentClassifier(ModelSpec(pipeline="classifier", pretrained=str(tiny_model), dropout=[dropout]))
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = dropout
    return model.train()


def sentiment_batch():
    """Two rows of SENTIMENT_IDS with their padding mask and labels, as TaskData.batch builds them."""
    ids = SENTIMENT_IDS
    return {"x": {"input_ids": ids, "attention_mask": (ids != 0).long(), "token_type_ids": torch.zeros_like(ids)},
            "labels": torch.tensor([1, 3])}


def multitask_spec(model, mode="full-model", **kw):
    """A ModelSpec of the tiny checkpoint for MultitaskBERT: no head dropout, rank-4 adapters."""
    return ModelSpec(**{**dict(pretrained=str(model), fine_tune_mode=mode, dropout=[0.0] * 3, lora_rank=4,
                               lora_alpha=8.0), **kw})


def tiny_batch():
    """(input_ids, attention_mask, token_type_ids) of two 7-token rows of the tiny vocabulary."""
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(5, 40, (2, 7), generator=g)
    return ids, torch.ones_like(ids), torch.zeros_like(ids)


def parameters_with_gradients(model):
    """The names of a MultitaskBERT's parameters that one backward pass through all three tasks reaches."""
    ids, mask, types = tiny_batch()
    (model.predict_sentiment(ids, mask).sum() + model.predict_paraphrase(ids, mask, token_type_ids=types).sum()
     + model.predict_similarity(ids, mask, token_type_ids=types).sum()).backward()
    return {n for n, p in model.named_parameters() if p.grad is not None}
