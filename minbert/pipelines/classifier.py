"""Part 1 (handout section 4): fine-tune BERT for sentiment on SST and CFIMDB, one model per dataset.

For each dataset the run trains (`train_dataset`), keeps the best dev epoch, reloads it and writes dev
and test predictions (`predict_dataset`); the epoch protocol (checkpoints, --resume, early stopping,
the log) is training/fit.py's. classifier.py is the command; its flags become a
specs.ClassifierSettings in flags/settings.py. `predict_files` writes a saved model's predictions to files
of one's choosing (classifier.py's test, as the starter calls it).
"""
import dataclasses
import time
from pathlib import Path

import torch

from datasets import SentenceClassificationDataset, set_pad_multiple
from evaluation import predict
from minbert.cli import main_print
from minbert.course_data import TASK_PREFIX, TASKS, data_file, read_examples, sentiment_task
from minbert.objectives.losses import ClassificationLoss
from minbert.runs.folders import open_run
from minbert.runs.outputs import check_outputs
from minbert.runs.publishing import place
from minbert.scoring import accuracy, macro_f1, prediction_writer, write_dev_scores, write_predictions
from minbert.tasks.sentiment import BertSentimentClassifier, load_classifier
from minbert.training.fit import Pipeline, fit
from minbert.training.trainer import build_trainer
from tokenizer import BertTokenizer
from utils import distributed, maybe_compile, seed_everything


def model_eval(data, model, device, amp="none", desc="eval"):
    """(accuracy, macro-F1, predictions, gold labels, ids, logits) of `model` on a labelled dataset."""
    model.eval()
    logits = predict(model.logits, data, 64, device, amp, desc=desc)
    pred, gold = logits.argmax(-1), data.labels.numpy()
    return accuracy(pred, gold), macro_f1(pred, gold), pred, gold, data.ids, logits


def predict_labels(data, model, device, amp="none", desc="test"):
    """The class `model` predicts for every row of `data` (labelled or not), in the data's order."""
    model.eval()
    return predict(model.logits, data, 64, device, amp, desc=desc).argmax(-1)


def predict_dataset(model, data, files, device, amp="none", names=None, raw=None):
    """Predict dev and test with `model` (the best epoch), write both leaderboard files (`names`: {split: file
    name}, by default the handout's {stem}-{split}-out.csv) and the raw dev outputs (`raw(logits)`, by default
    the logits) into the run folder; returns the dev accuracy."""
    name = data["dev"].task.name
    names = names or {split: f"{files.stem}-{split}-out.csv" for split in ("dev", "test")}
    acc, _, dev_pred, _, _, logits = model_eval(data["dev"], model, device, amp, desc=f"{name} dev")
    write_dev_scores(files.folder / f"{files.stem}-dev-scores.npz", name, data["dev"],
                     raw(logits) if raw else logits, dev_pred)
    write_predictions(files.folder / names["dev"], name, data["dev"].ids, dev_pred)
    test_pred = predict_labels(data["test"], model, device, amp, desc=f"{name} test")
    write_predictions(files.folder / names["test"], name, data["test"].ids, test_pred)
    return acc


def predict_files(checkpoint, dev, test, dev_out, test_out, device, amp="none", by="classifier.py"):
    """The Part 1 model saved in `checkpoint` (a run's, or save_model's), rebuilt from its spec, predicts the
    `dev` and `test` CSVs; dev_out and test_out get the leaderboard files, checked before any work and recorded
    as written by `by` (runs/outputs.py's rule). Returns the dev accuracy."""
    check_outputs(files=[("dev_out", dev_out), ("test_out", test_out)],
                  inputs=[("the dev data file", dev), ("the test data file", test), ("the checkpoint", checkpoint)])
    model, spec = load_classifier(checkpoint, device)
    task, tokenizer = sentiment_task(dev), BertTokenizer.from_pretrained(spec.pretrained)
    data = {split: SentenceClassificationDataset(read_examples(path, task, split), task, tokenizer, spec.max_length)
            for split, path in (("dev", dev), ("test", test))}
    acc, _, dev_pred, *_ = model_eval(data["dev"], model, device, amp, desc=f"{task} dev")
    test_pred = predict_labels(data["test"], model, device, amp, desc=f"{task} test")
    place([(dev_out, prediction_writer(task, data["dev"].ids, dev_pred)),
           (test_out, prediction_writer(task, data["test"].ids, test_pred))], by, mode="w")
    main_print(f"{checkpoint}: {task} dev accuracy {acc:.3f}; predictions in {dev_out}, {test_out}")
    return acc


class SentimentPipeline(Pipeline):
    """One dataset of Part 1 for training/fit.py. Another backbone (GPT-2's, gpt2/sentiment.py) subclasses it
    and names its own tokenizer, model, run folder prefix and file stems; the rest is this one code path."""
    kind, score_name = "classifier", "dev accuracy"
    loss_scales = " (or a regulariser's weight)"

    @staticmethod
    def load_tokenizer(pretrained):
        return BertTokenizer.from_pretrained(pretrained)

    @staticmethod
    def build_model(spec, runtime):
        return BertSentimentClassifier(spec, runtime.attn, fast_dropout=runtime.fast_dropout)

    @staticmethod
    def stem(settings, name):
        """The file stem of one dataset's model in the run folder: the handout's {mode}-{dataset}."""
        return f"{settings.model.fine_tune_mode}-{name}"

    @classmethod
    def published_names(cls, settings, name):
        """The leaderboard files one dataset's run writes and publishes: {dev,test} -> file name."""
        return {split: f"{cls.stem(settings, name)}-{split}-out.csv" for split in ("dev", "test")}

    @classmethod
    def published_paths(cls, settings, name):
        """Where one dataset's leaderboard files are copied, {split: (flag, path)}: into --predictions_dir, or
        to the file a flag names (settings.published; the handout's --para_dev_out of
        gpt2/paraphrase_detection.py)."""
        given = settings.published or {}
        return {split: (f"--{TASK_PREFIX[name]}_{split}_out", Path(given[name, split]))
                if (name, split) in given
                else ("--predictions_dir", Path(settings.predictions_dir) / f)
                for split, f in cls.published_names(settings, name).items()}

    def dataset(self, split, tokenizer):
        """One split of the dataset, tokenized."""
        settings = self.settings
        examples = read_examples(data_file(settings.data_dir, self.name, split), self.name, split)
        return SentenceClassificationDataset(examples, self.name, tokenizer, settings.model.max_length)

    def __init__(self, settings, name):
        runtime = settings.runtime
        self.settings, self.name, self.device, self.amp = settings, name, runtime.device, runtime.amp
        self.file_stem = self.stem(settings, name)
        self.inputs = {f"{name} {split} "
                       "data": data_file(settings.data_dir, name, split) for split in ("train", "dev", "test")}
        tokenizer = self.load_tokenizer(settings.model.pretrained)
        self.data = {split: self.dataset(split, tokenizer) for split in ("train", "dev", "test")}
        set_pad_multiple(self.data, runtime.pad_multiple)
        self.spec = dataclasses.replace(settings.model, num_labels=TASKS[name].num_labels)
        self.model = self.build_model(self.spec, runtime).to(self.device)
        self.merge = settings.merge
        frozen = self.spec.fine_tune_mode == "last-linear-layer"
        if frozen:  # the backbone never changes: run it once per split, train the head on its outputs
            self.model.backbone.eval()
            for split, d in self.data.items():
                d.features = torch.from_numpy(predict(lambda b: self.model.embed(**b["x"]), d, 64,
                                                      self.device, self.amp, desc=f"{name} {split} features"))
        maybe_compile(self.model, runtime.compile and not frozen)  # a frozen backbone has already done its work
        self.steps = -(-len(self.data["train"]) // settings.batch_size)
        total = settings.recipe.epochs * -(-self.steps // settings.recipe.grad_accum)  # optimizer steps of the run
        self.loss = ClassificationLoss(settings.recipe.label_smoothing,
                                       **ClassificationLoss.regularizers(settings.regularizers, self.model, total))

    def batches(self, epoch):
        rank, world = distributed()
        settings = self.settings
        seed = settings.recipe.seed * 1000 + epoch
        batches = self.data["train"].batches(settings.batch_size, True, seed, settings.bucket, rank, world)
        return batches, self.steps, {"dataset": self.name}

    def evaluate(self):
        train_acc = model_eval(self.data["train"], self.model, self.device, self.amp, f"{self.name} train")[0]
        acc, f1 = model_eval(self.data["dev"], self.model, self.device, self.amp, f"{self.name} dev")[:2]
        return {"accuracy": acc, "f1": f1, "train_accuracy": train_acc}, acc

    def describe(self, m):
        return f"train acc {m['train_accuracy']:.3f}, dev acc {m['accuracy']:.3f}, dev f1 {m['f1']:.3f}"

    @staticmethod
    def raw_output(logits):
        """What the dev-scores file keeps of the model's dev logits (report.py reads it)."""
        return logits

    def write_outputs(self, files, best):
        names = self.published_names(self.settings, self.name)
        acc = predict_dataset(self.model, self.data, files, self.device, self.amp, names, self.raw_output)
        print(f"{self.name}: best epoch {best['epoch']}, dev accuracy {acc:.3f}; run folder {files.folder} "
              f"(checkpoint {files.best.name}, log {files.log.name})")
        paths = self.published_paths(self.settings, self.name)
        published = [(files.folder / n, paths[split][1]) for split, n in names.items()]
        return {"dataset": self.name, "dev_acc": acc, "best_epoch": best["epoch"]}, published


def train_dataset(settings, name, run, on_epoch=None, pipeline_class=SentimentPipeline):
    """Train on one dataset, keep the best dev epoch, reload it and write its dev and test predictions.
    `on_epoch(epoch, dev_acc)` is called after each epoch's evaluation."""
    seed_everything(settings.recipe.seed)
    pipeline = pipeline_class(settings, name)
    trainer = build_trainer(pipeline.model, pipeline.loss, settings.recipe, settings.runtime, pipeline.steps,
                            train_data=pipeline.data["train"], rows=settings.batch_size)
    main_print(pipeline.data["train"].describe_batches(settings.batch_size, settings.bucket))
    return fit(pipeline, trainer, run, settings, on_epoch)


def run_classifier(settings, on_epoch=None, pipeline_class=SentimentPipeline):
    """Part 1 as classifier.py runs it: a run folder, then every --datasets entry trained in turn."""
    stems = [pipeline_class.stem(settings, n) for n in settings.datasets]
    with open_run(pipeline_class.kind, stems, settings.run.name, settings.run.dir, settings.run.resume) as run:
        published = [out for n in settings.datasets for out in pipeline_class.published_paths(settings, n).values()]
        inputs = [(f"the {n} {split} data file", data_file(settings.data_dir, n, split))
                  for n in settings.datasets for split in ("train", "dev", "test")]
        check_outputs(dirs=[("--predictions_dir", settings.predictions_dir)], files=published, inputs=inputs,
                      own=run.folder, backup=settings.run.backup, typed=settings.run.typed)
        for n in settings.datasets:  # every data set's files read and checked, before the first one trains
            for split in ("train", "dev", "test"):
                read_examples(data_file(settings.data_dir, n, split), n, split, log=lambda *a, **k: None)
        world = distributed()[1]
        processes = f", {world} processes" if world > 1 else ""
        main_print(f"fine-tune mode {settings.model.fine_tune_mode}, {settings.recipe.lr_why}, "
                   f"{settings.model.pretrained} on {settings.runtime.device}{processes}; run folder {run.folder}")
        results = []
        for name in settings.datasets:
            t0 = time.perf_counter()
            results.append(train_dataset(settings, name, run, on_epoch, pipeline_class))
            main_print(f"{name}: {(time.perf_counter() - t0) / 60:.1f} minutes")
        return results
