"""Part 1: fine-tune BERT for sentiment on SST and CFIMDB (handout section 4).

    python classifier.py --fine-tune-mode full-model --lr 1e-5 [--use_gpu]

--fine-tune-mode lora|dora trains low-rank adapters on a frozen BERT (lora.py) instead. For each dataset
the run trains (`train`), keeps the best dev epoch, reloads it and writes dev and test predictions
(`test`); the epoch protocol (checkpoints, --resume, early stopping, the log) is trainer.fit's. The flags
are declared in flags.py (classifier_parser).
"""
import time
from pathlib import Path

import torch
import torch.nn as nn

from bert import BertModel
from checkpoint import ModelSpec
from datasets import TASKS, SentenceClassificationDataset, data_file, read_examples, set_pad_multiple, setup_shapes
from evaluation import accuracy, macro_f1, predict, write_dev_scores, write_predictions
from flags import check_max_length, hidden_size, parse_classifier, resolve_lr, run_defining
from finetune import prepare_backbone
from losses import ClassificationLoss
from precision import setup_precision
from runs import check_outputs, open_run
from tokenizer import BertTokenizer
from trainer import Pipeline, build_trainer, fit
from utils import distributed, get_device, main_guard, main_print, maybe_compile, seed_everything


class BertSentimentClassifier(nn.Module):
    """BERT -> pooler_output -> dropout -> linear. In 'last-linear-layer' mode BERT is frozen; in 'lora' and
    'dora' only its adapters train."""

    def __init__(self, spec: ModelSpec, attn="sdpa"):
        super().__init__()
        self.spec, self.num_labels = spec, spec.num_labels
        self.bert = BertModel.from_pretrained(spec.pretrained, attn_impl=attn)
        prepare_backbone(self.bert, spec)
        self.dropout = nn.Dropout(spec.dropout[0])
        self.classifier = nn.Linear(self.bert.config.hidden_size, spec.num_labels)

    def embed(self, input_ids, attention_mask, token_type_ids=None):
        return self.bert(input_ids, attention_mask, token_type_ids)["pooler_output"]

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, features=None):
        """Logits; `features` are cached pooler outputs of a frozen BERT, used instead of running it."""
        pooled = features if features is not None else self.embed(input_ids, attention_mask, token_type_ids)
        return self.classifier(self.dropout(pooled))

    def logits(self, batch):
        """The logits of a batch (token inputs, or cached features): the one path training and evaluation use."""
        return self(features=batch["features"]) if "features" in batch else self(**batch["x"])


def model_eval(data, model, device, amp="none", desc="eval"):
    """(accuracy, macro-F1, predictions, gold labels, ids, logits) of `model` on a labelled dataset."""
    model.eval()
    logits = predict(model.logits, data, 64, device, amp, desc=desc)
    pred, gold = logits.argmax(-1), data.labels.numpy()
    return accuracy(pred, gold), macro_f1(pred, gold), pred, gold, data.ids, logits


def test(model, data, files, device, amp="none"):
    """Predict dev and test with `model` (the best epoch), write both leaderboard files and the raw dev
    outputs into the run folder; returns the dev accuracy."""
    name = data["dev"].task.name
    acc, _, dev_pred, _, _, logits = model_eval(data["dev"], model, device, amp, desc=f"{name} dev")
    write_dev_scores(files.folder / f"{files.stem}-dev-scores.npz", name, data["dev"], logits, dev_pred)
    write_predictions(files.folder / f"{files.stem}-dev-out.csv", name, data["dev"].ids, dev_pred)
    test_pred = predict(model.logits, data["test"], 64, device, amp, desc=f"{name} test").argmax(-1)
    write_predictions(files.folder / f"{files.stem}-test-out.csv", name, data["test"].ids, test_pred)
    return acc


class SentimentPipeline(Pipeline):
    """One dataset of Part 1 for trainer.fit."""
    kind, score_name = "classifier", "dev accuracy"

    def __init__(self, args, name, device):
        self.args, self.name, self.device = args, name, device
        tokenizer = BertTokenizer.from_pretrained(args.pretrained)
        self.data = {s: SentenceClassificationDataset(read_examples(data_file(args.data_dir, name, s), name, s),
                                                      name, tokenizer, args.max_length)
                     for s in ("train", "dev", "test")}
        set_pad_multiple(self.data, args.pad_multiple)
        self.spec = ModelSpec(pipeline="classifier", pretrained=args.pretrained, fine_tune_mode=args.fine_tune_mode,
                              lora_rank=args.lora_rank, lora_alpha=args.lora_alpha, lora_dropout=args.lora_dropout,
                              lora_targets=args.lora_targets, dropout=[args.hidden_dropout_prob],
                              max_length=args.max_length, num_labels=TASKS[name].num_labels,
                              adapter_dim=args.adapter_dim, prefix_length=args.prefix_length)
        self.model = BertSentimentClassifier(self.spec, args.attn).to(device)
        self.merge = args.merge
        frozen = args.fine_tune_mode == "last-linear-layer"
        if frozen:  # the backbone never changes: run it once per split, train the head on its outputs
            self.model.bert.eval()
            for s, d in self.data.items():
                d.features = torch.from_numpy(predict(lambda b: self.model.embed(**b["x"]), d, 64, device, args.amp,
                                                      desc=f"{name} {s} features"))
        maybe_compile(self.model, args.compile and not frozen)  # a frozen backbone has already done its work
        self.steps = -(-len(self.data["train"]) // args.batch_size)
        total = args.epochs * -(-self.steps // args.grad_accum)  # optimizer steps of the run
        self.loss = ClassificationLoss(**ClassificationLoss.regularizers(args, self.model, total))

    def batches(self, epoch):
        rank, world = distributed()
        a = self.args
        return (self.data["train"].batches(a.batch_size, True, a.seed * 1000 + epoch, a.bucket, rank, world),
                self.steps, {"dataset": self.name})

    def evaluate(self):
        a = self.args
        train_acc = model_eval(self.data["train"], self.model, self.device, a.amp, f"{self.name} train")[0]
        acc, f1 = model_eval(self.data["dev"], self.model, self.device, a.amp, f"{self.name} dev")[:2]
        return {"accuracy": acc, "f1": f1, "train_accuracy": train_acc}, acc

    def describe(self, m):
        return f"train acc {m['train_accuracy']:.3f}, dev acc {m['accuracy']:.3f}, dev f1 {m['f1']:.3f}"

    def write_outputs(self, files, best):
        acc = test(self.model, self.data, files, self.device, self.args.amp)
        print(f"{self.name}: best epoch {best['epoch']}, dev accuracy {acc:.3f}; run folder {files.folder} "
              f"(checkpoint {files.best.name}, log {files.log.name})")
        published = [(files.folder / f"{files.stem}-{s}-out.csv", Path(self.args.predictions_dir) / f"{files.stem}-{s}-out.csv")
                     for s in ("dev", "test")]
        return {"dataset": self.name, "dev_acc": acc, "best_epoch": best["epoch"]}, published


def train(args, name, run, device, on_epoch=None):
    """Train on one dataset, keep the best dev epoch, reload it and write its dev and test predictions.
    `on_epoch(epoch, dev_acc)` is called after each epoch's evaluation."""
    seed_everything(args.seed)
    pipeline = SentimentPipeline(args, name, device)
    trainer = build_trainer(pipeline.model, args, device, pipeline.steps)
    main_print(pipeline.data["train"].describe_batches(args.batch_size, args.bucket))
    return fit(pipeline, trainer, run.files(f"{args.fine_tune_mode}-{name}"), run.name, args.epochs, args.patience,
               args.resume, run_defining(args, {f"{name} {s} data": data_file(args.data_dir, name, s)
                                                 for s in ("train", "dev", "test")}), on_epoch, f"the same command plus --resume {run.how}", args.tensorboard)


def get_args(argv=None):
    return parse_classifier(argv)


def main(argv=None, on_epoch=None):
    args = get_args(argv)
    device = get_device(args.use_gpu)
    setup_precision(args, device, log=main_print)
    setup_shapes(args, device, log=main_print)
    check_max_length(args.max_length, args.pretrained)
    lr_why = resolve_lr(args, hidden_size(args.pretrained))
    stems = [f"{args.fine_tune_mode}-{n}" for n in args.datasets]
    with open_run("classifier", stems, args.run_name, args.run_dir, args.resume) as run:
        check_outputs(dirs=[("--predictions_dir", args.predictions_dir)],
                      files=[("--predictions_dir", Path(args.predictions_dir) / f"{s}-{x}-out.csv")
                             for s in stems for x in ("dev", "test")],
                      inputs=[(f"the {n} {s} data file", data_file(args.data_dir, n, s)) for n in args.datasets
                              for s in ("train", "dev", "test")], own=run.folder)
        main_print(f"fine-tune mode {args.fine_tune_mode}, {lr_why}, {args.pretrained} on {device}"
                   + (f", {distributed()[1]} processes" if distributed()[1] > 1 else "") + f"; run folder {run.folder}")
        results = []
        for name in args.datasets:
            t0 = time.perf_counter()
            results.append(train(args, name, run, device, on_epoch))
            main_print(f"{name}: {(time.perf_counter() - t0) / 60:.1f} minutes")
        return results


if __name__ == "__main__":
    main_guard(main)
