"""One row of bench.py made ready to time (a Candidate): the model as a pipeline trains it (ours with the
recipe's regularisers, ours plain, every switch off) or HF transformers' on the same weights, its optimizer,
the batches as the pipelines build them, and its training and inference steps. Our rows' optimizer, schedule
and step come from the builder every training run calls (training/trainer.py build_trainer, with the default
recipe's schedule); HF's rows take HF's Trainer's default AdamW. The training step is the pipelines' own
(training/step.py) whichever model it trains."""
from dataclasses import replace

import numpy as np
import torch
import torch.nn.functional as F

from bert import BertModel
from config import BertConfig
from datasets import TaskData, batch_indices, set_fixed_shapes, set_pad_multiple
from minbert.cli import MinbertError
from minbert.course_data import data_file, read_examples
from minbert.finetuning.pals import PALs
from minbert.hub import resolve_pretrained
from minbert.objectives.losses import ClassificationLoss, TermLoss
from minbert.objectives.regularizers import build_regularizers, regularizer_weights
from minbert.precision import autocast
from minbert.specs import ModelSpec, Recipe
from minbert.tasks.sentiment import BertSentimentClassifier
from minbert.training.recorded import RecordedFunction, RecordedStep, cannot_record, shape_key
from minbert.training.step import TrainingStep
from minbert.training.trainer import build_trainer
from utils import to_device

# The rate every row's optimizer takes: what is timed does not depend on it.
LR = 1e-5


def make_batches(settings, tokenizer, bucket, vocab_size, seed=0, fixed=False):
    """Index lists of real examples (or synthetic token ids) as padded batches on the host; bucketed batches
    are padded to a multiple of --pad_multiple, as the pipelines pad them, or with `fixed` to the fixed shapes
    of the recorded step (datasets.set_fixed_shapes: every batch --batch_size rows, a few widths). Synthetic ids
    are drawn within the model's `vocab_size`."""
    if settings.data == "synthetic":
        rng = np.random.default_rng(seed)
        out = []
        for _ in range(settings.warmup + settings.steps):
            # word-piece ids of bert-base's vocabulary, [CLS] first; within a smaller checkpoint's vocabulary
            high = min(20000, vocab_size)
            ids = torch.from_numpy(rng.integers(min(1000, high // 2), high, size=(settings.batch_size,
                                                                                  settings.seq_len)))
            ids[:, 0] = 101 if vocab_size > 101 else 0
            out.append({"x": {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                              "token_type_ids": torch.zeros_like(ids)},
                        "labels": torch.zeros(settings.batch_size, dtype=torch.long)})
        return out
    task = "sst" if settings.data == "sst" else "quora"
    examples = read_examples(data_file(settings.data_dir, task, "train"), task, "train", log=lambda *_: None)
    data = set_pad_multiple(TaskData(examples, task, tokenizer, max_length=settings.seq_len),
                            settings.runtime.pad_multiple if bucket else 0)
    if fixed:
        set_fixed_shapes(data, settings.batch_size)
    idx = batch_indices(data.lengths, settings.batch_size, shuffle=True, seed=seed, bucket=bucket)
    wanted = settings.warmup + settings.steps
    if len(idx) < wanted:  # a small training file: the steps go round its batches again, as epochs would
        print(f"{settings.data}: the training file holds {len(idx)} batches of {settings.batch_size}, fewer than the "
              f"{wanted} steps asked for (--warmup + --steps): they are run again in turn")
    return [data.batch(idx[i % len(idx)]) for i in range(wanted)]


def flops_per_batch(cfg, batch):
    """Forward FLOPs of the padded batch: 2 per weight per token for the matmuls, plus attention."""
    B, T = batch["x"]["input_ids"].shape
    H, L, I = cfg.hidden_size, cfg.num_hidden_layers, cfg.intermediate_size
    per_token = L * (2 * (4 * H * H + 2 * H * I) + 4 * T * H)  # QKVO, FFN; QK^T and AV
    return B * T * per_token


def hf_model(settings, cfg):
    """The usual alternative, for reference: HF transformers' BertModel on the same weights, as its
    documentation recommends running it (PyTorch's scaled_dot_product_attention, attn_implementation="sdpa",
    chosen explicitly: some versions build a model from a config with their eager attention; the Trainer's
    default AdamW: hf_optimizer), on our length-bucketed batches (what its Trainer's group_by_length gives) or
    on batches padded in random order. Only bench.py touches transformers, and only with --hf."""
    try:
        import transformers
    except ImportError:
        raise MinbertError("--hf needs the transformers package (pip install transformers); "
                           "it is a reference for timing only, not a requirement") from None
    if settings.pretrained:
        # fp32 master weights whatever the file holds (transformers 5 keeps a checkpoint's own dtype)
        return transformers.BertModel.from_pretrained(str(resolve_pretrained(settings.pretrained).folder),
                                                      attn_implementation="sdpa").float()
    return transformers.BertModel(transformers.BertConfig(**cfg.to_dict(), attn_implementation="sdpa"))


def hf_optimizer(params, lr):
    """The AdamW HF's Trainer builds by default, from the installed transformers' own default
    (`adamw_torch_fused`, torch's fused kernel, since torch 2.8; `adamw_torch` before):
    (optimizer, its name in the row)."""
    import transformers
    fused = transformers.TrainingArguments.__dataclass_fields__["optim"].default == "adamw_torch_fused"
    return torch.optim.AdamW(params, lr=lr, fused=fused), "torch-fused" if fused else "torch"


class HFLoss(TermLoss):
    """HF's BertModel with a linear head, trained on cross entropy: its pooled output as the handout's Part 1
    pools it, as the training step takes a loss."""

    def __init__(self, forward, head):
        super().__init__()
        self.hf_forward, self.head = forward, head

    def forward(self, model, batch):
        return F.cross_entropy(self.head(self.hf_forward(**batch["x"])["pooler_output"]), batch["labels"])


class Candidate:
    """One set of switches made ready to time: the model (ours as the pipelines build it, or HF's), its
    optimizer, the batches on the device, the training step (training/step.py's, the pipelines' own) and the
    inference step, and what describes the row.

    `record_step`: our steps recorded as CUDA graphs, as the pipelines run them on a GPU
    (training/recorded.py); `compiled`: the model under torch.compile(mode="reduce-overhead"), the one line HF
    documents for speed (CUDA graphs of the compiled model, the optimizer eager). Both take the fixed shapes
    of the recorded step."""

    def __init__(self, settings, tokenizer, cfg, label, fast=True, bucket=None, hf=False, amp=None,
                 recipe=False, record_step=False, compiled=False):
        runtime = settings.runtime
        self.device = device = runtime.device
        amp = amp or (runtime.amp if fast else "none")
        bucket = fast if bucket is None else bucket
        cfg = BertConfig.from_dict(cfg.to_dict(), attn_impl=runtime.attn if fast else "explicit")
        torch.manual_seed(0)
        if hf:
            model = hf_model(settings, cfg)
        elif settings.pretrained:
            model = BertModel.from_pretrained(settings.pretrained, attn_impl=cfg.attn_impl)
        else:
            model = BertModel(cfg)
        if hf:
            head = torch.nn.Linear(cfg.hidden_size, 5)
        else:  # Part 1's classifier, what trains set up as the pipelines do it (--fine-tune-mode, --pals)
            # (the model is given, so `pretrained` only names it in messages: a random one is its --config)
            spec = ModelSpec(pipeline="classifier", pretrained=settings.pretrained or f"--config {settings.config}",
                             fine_tune_mode=settings.fine_tune_mode, lora_rank=settings.lora_rank,
                             lora_alpha=2.0 * settings.lora_rank, dropout=[0.3], num_labels=5)
            classifier = BertSentimentClassifier(spec, bert=model)
            head = classifier.classifier
            if settings.pals:  # a submodule of the classifier, so that its parameters train with it
                classifier.pals = PALs(model.config, ("sst",))
                classifier.pals.attach(model)
                classifier.pals.task = "sst"
        model.to(device)
        head.to(device)
        self.model, self.head = model, head
        self.batches = [to_device(b, device) for b in make_batches(settings, tokenizer, bucket,
                                                                   model.config.vocab_size,
                                                                   fixed=record_step or compiled)]
        # non-pad tokens of the real rows (a fixed-shape batch's filler rows are computed, not counted)
        self.real = [int(b["x"]["attention_mask"][b["weight"] > 0 if "weight" in b else slice(None)].sum())
                     for b in self.batches]
        self.padded = [b["x"]["input_ids"].numel() for b in self.batches]
        self.flops = [flops_per_batch(cfg, b) for b in self.batches]
        fwd = model
        if compiled:
            fwd = torch.compile(model, mode="reduce-overhead")
        elif fast and runtime.compile:
            fwd = torch.compile(model, dynamic=True)
        if hf:
            # HF's model and head on cross entropy, through the pipelines' one training step, with HF's
            # Trainer's default AdamW; a constant rate
            self.params = [p for p in [*model.parameters(), *head.parameters()] if p.requires_grad]
            self.opt, adamw = hf_optimizer(self.params, lr=LR)
            hf_forward = fwd
            fwd = lambda **x: {"pooler_output": hf_forward(**x).pooler_output}  # noqa: E731
            step = TrainingStep(torch.nn.ModuleList([model, head]), HFLoss(fwd, head), self.opt, None, device,
                                amp)
        else:
            # Part 1's loss (with the recipe's regularisers when asked), its optimizer, schedule and step
            # built as a training run builds them: the default recipe's (its linear schedule with warm-up,
            # its clipping), AdamW's kernels as the row's switches say; --compile on a recorded step compiles
            # AdamW's update too
            total = settings.warmup + settings.steps * settings.repeats
            regs = build_regularizers(settings.regularizers, classifier, total) if recipe else {}
            train_recipe = Recipe(lr=LR, epochs=1, foreach=fast, fused=fast and settings.fused)
            row_runtime = replace(runtime, amp=amp, compile=fast and runtime.compile, record_step=record_step)
            trainer = build_trainer(classifier, ClassificationLoss(**regs), train_recipe, row_runtime, total,
                                    quiet=True)
            classifier.bert = fwd  # (after the builder: freezing and layer depths read the plain model)
            self.params, self.opt = trainer.params, trainer.optimizer
            # (a recorded step runs the capturable path: optimizer._step_capturable, or compiled)
            adamw = ("capturable, compiled" if self.opt.compiled else "capturable" if record_step
                     else "fused" if self.opt.defaults["fused"] else "foreach" if fast else "loop")
            step = trainer.step

        def train_step(b):
            step(b)
            step.zero_grad()

        def infer_step(b):
            with torch.inference_mode(), autocast(device, amp):
                return fwd(**b["x"])["pooler_output"]

        if compiled:  # torch's rule for CUDA graph trees: say where each step begins
            def begin(step):
                def run(b):
                    torch.compiler.cudagraph_mark_step_begin()
                    return step(b)
                return run
            train_step, infer_step = begin(train_step), begin(infer_step)
        if record_step:  # the whole step, as the pipelines record it on a GPU
            if hf:
                why = cannot_record(Recipe(lr=0.0), amp)  # HF's step: AdamW, one batch a step, no surgery
                if why:
                    raise MinbertError(f"bench.py: the recorded step cannot take {why[0]}; add --no_record_step")
                train_step = RecordedStep(step)
            else:  # the trainer's, checked there
                train_step = trainer.recorded
            eager_infer = infer_step
            warm = lambda b: [eager_infer(b) for _ in range(2)]  # noqa: E731
            infer_step = RecordedFunction(eager_infer, warm, device)
        self.train_step, self.infer_step = train_step, infer_step
        self.row = {"label": label, "fine_tune_mode": "full-model" if hf else settings.fine_tune_mode,
                    "pals": bool(settings.pals and not hf), "amp": amp, "attn": "sdpa (HF)" if hf else cfg.attn_impl,
                    "bucket": bucket, "pad_multiple": runtime.pad_multiple if bucket else 0,
                    "adamw": adamw, "recorded": record_step,
                    "compile": "reduce-overhead" if compiled else bool(fast and runtime.compile),
                    "regularizers": regularizer_weights(settings.regularizers) if recipe and not hf else {}}

    def train(self, on):
        self.model.train(on)
        self.head.train(on)

    def warmup(self, n):
        """The untimed batches: the first `n`, and for a row that records or compiles per shape one batch of
        every shape its batches have, so that no recording is timed: once more for our recorded step (it
        records a shape at its first call), twice for torch.compile(mode="reduce-overhead") (its CUDA graph
        trees run a shape's first call eagerly and record at the second)."""
        times = 1 if self.row["recorded"] else 2 if self.row["compile"] == "reduce-overhead" else 0
        shapes = {}
        for b in self.batches:
            shapes.setdefault(shape_key(b), b)
        return self.batches[:n] + [b for b in shapes.values() for _ in range(times)]


