"""Part 1: fine-tune BERT for sentiment on SST and CFIMDB (handout section 4).

    python classifier.py --fine-tune-mode {full-model,last-linear-layer} --lr {1e-3,1e-5} [--use_gpu]

For each dataset the run trains, keeps the best dev epoch, reloads it and writes dev and test predictions into
its run folder and predictions/ (the handout's eight files for both modes). The handout's names are here:
  - BertSentimentClassifier: BERT's pooled output, dropout, a linear layer (minbert/tasks/sentiment.py);
  - train: every --datasets entry (minbert/pipelines/classifier.py: the data, the loss, the epoch protocol);
  - test and model_eval: the best epoch's predictions, and one dataset's accuracy and macro-F1;
  - get_args: the flags (declared in minbert/flags/table.py, every one in docs/flags.md).
--fine-tune-mode lora|dora|adapter|prefix trains adapters on a frozen BERT instead (minbert/finetuning/).
"""
from minbert.flags.settings import classifier_settings, parse_classifier
from minbert.pipelines.classifier import model_eval, run_classifier
from minbert.pipelines.classifier import predict_dataset as test
from minbert.tasks.sentiment import BertSentimentClassifier
from utils import main_guard

__all__ = ["BertSentimentClassifier", "train", "test", "model_eval", "get_args", "main"]


def get_args(argv=None):
    return parse_classifier(argv)


def train(args, on_epoch=None):
    """Train one model per --datasets entry and write its predictions; returns one result per dataset.
    `on_epoch(epoch, dev accuracy)` is called after each epoch's evaluation."""
    return run_classifier(classifier_settings(args), on_epoch)


def main(argv=None, on_epoch=None):
    return train(get_args(argv), on_epoch)


if __name__ == "__main__":
    main_guard(main)
