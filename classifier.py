"""Part 1: fine-tune BERT for sentiment on SST and CFIMDB (handout section 4).

    python classifier.py --fine-tune-mode {full-model,last-linear-layer} --lr {1e-3,1e-5} [--use_gpu]

For each dataset the run trains, keeps the best dev epoch, reloads it and writes dev and test predictions into
its run folder and predictions/ (the handout's eight files for both modes). The starter's names are here:
  - BertSentimentClassifier: BERT's pooled output, dropout, a linear layer (minbert/tasks/sentiment.py);
  - train: every --datasets entry (minbert/pipelines/classifier.py: the data, the loss, the epoch protocol);
  - get_args: the flags (declared in minbert/flags/table.py, every one in docs/flags.md);
  - for a loop of one's own, on the same library: load_data and SentimentDataset, SentimentTestDataset (the
    course CSV read and tokenized as datasets.py does, batched by a DataLoader), model_eval and model_test_eval,
    save_model (the project's checkpoint format), test (a saved model's predictions), seed_everything,
    TQDM_DISABLE.
--fine-tune-mode lora|dora|adapter|prefix trains adapters on a frozen BERT instead (minbert/finetuning/).
"""
from datasets import SentimentRows, TaskData, sentiment_rows
from minbert.flags.settings import classifier_settings, parse_classifier
from minbert.pipelines import classifier as part1
from minbert.runs.checkpoint import save_model as save_checkpoint_file
from minbert.specs import MAX_LENGTH, ModelSpec
from minbert.tasks.sentiment import BertSentimentClassifier
from tokenizer import BertTokenizer
from utils import TQDM_DISABLE, MinbertError, get_device, main_guard, seed_everything

__all__ = ["TQDM_DISABLE", "seed_everything", "BertSentimentClassifier", "SentimentDataset", "SentimentTestDataset",
           "load_data", "model_eval", "model_test_eval", "save_model", "train", "test", "get_args", "main"]

# What the starter's test(args) reads: the namespace its __main__ builds for each dataset.
TEST_FIELDS = ("filepath", "dev", "test", "dev_out", "test_out", "use_gpu")


def load_data(filename, flag="train"):
    """A Part 1 CSV read by the course reader: [(sentence, label, id)] (and the class count for 'train'), or
    [(sentence, id)] for 'test'."""
    return sentiment_rows(filename, flag)


class SentimentDataset(SentimentRows):
    """load_data's labelled rows tokenized by args.pretrained's tokenizer (datasets.SentimentRows)."""
    labelled = True

    def __init__(self, dataset, args, task="sst"):
        # the starter's own namespaces name no checkpoint: its model is bert-base-uncased, cut at 512 tokens
        pretrained = getattr(args, "pretrained", ModelSpec.pretrained)
        max_length = getattr(args, "max_length", MAX_LENGTH["classifier"])
        super().__init__(dataset, task, BertTokenizer.from_pretrained(pretrained), max_length, self.labelled)


class SentimentTestDataset(SentimentDataset):
    """load_data's unlabelled test rows, tokenized as SentimentDataset's."""
    labelled = False


def model_eval(dataloader, model, device):
    """(accuracy, macro-F1, predictions, gold labels, sentences, ids) of `model` on the data `dataloader` holds."""
    data = dataloader if isinstance(dataloader, TaskData) else dataloader.dataset  # a DataLoader's, or itself
    acc, f1, pred, gold, ids, _ = part1.model_eval(data, model, device)
    return acc, f1, list(pred), list(gold), [e.texts[0] for e in data.examples], ids


def model_test_eval(dataloader, model, device):
    """(predictions, sentences, ids) of `model` on the data `dataloader` holds, labelled or not."""
    data = dataloader if isinstance(dataloader, TaskData) else dataloader.dataset
    return list(part1.predict_labels(data, model, device)), [e.texts[0] for e in data.examples], data.ids


def save_model(model, optimizer, args, config, filepath):
    """Save `model` (its spec and trained tensors) and `optimizer`'s state as a checkpoint test reads back."""
    # `config` is the spec the model holds, which rebuilds it; `args` are a run's to record, not a model's
    return save_checkpoint_file(filepath, model, optimizer, by="classifier.py save_model")


def get_args(argv=None):
    """The flags, parsed and checked (minbert/flags/)."""
    return parse_classifier(argv)


def train(args, on_epoch=None):
    """Train one model per --datasets entry and write its predictions; returns one result per dataset.
    `on_epoch(epoch, dev accuracy)` is called after each epoch's evaluation."""
    return part1.run_classifier(classifier_settings(args), on_epoch)


def test(args):
    """Write the predictions on args.dev and args.test of the model saved at args.filepath; returns dev accuracy."""
    missing = [f for f in TEST_FIELDS if not hasattr(args, f)]
    if missing:
        raise MinbertError(f"test(args) takes the starter's namespace ({', '.join(TEST_FIELDS)}); this one lacks "
                           f"{', '.join(missing)} (a run of train(args) writes its predictions itself)")
    return part1.predict_files(args.filepath, args.dev, args.test, args.dev_out, args.test_out,
                               get_device(args.use_gpu), by="classifier.py test")


def main(argv=None, on_epoch=None):
    return train(get_args(argv), on_epoch)


if __name__ == "__main__":
    main_guard(main)
