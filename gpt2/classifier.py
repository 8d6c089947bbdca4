"""Build GPT-2, Part 1: sentiment classification on SST and CFIMDB from GPT-2's
last token (handout section 6).

    cd gpt2 && python classifier.py --fine-tune-mode {last-linear-layer,full-model} --pretrained FOLDER
    [--use_gpu]

For each dataset the run trains, keeps the best dev epoch, reloads it and writes dev and test
predictions into its run folder (runs/gpt2-classifier-TIMESTAMP, or --run_name / --run_dir) and
predictions/: the handout's finetune-{sst,cfimdb}-{dev,test}-out.csv (full-model) or pretrain-...
(last-linear-layer). The handout's names:
  - GPT2SentimentClassifier: the last token's hidden state, dropout, a linear layer (gpt2/sentiment.py);
  - train: every --datasets entry, through minbert's Part 1 pipeline (the epoch protocol, --resume, run
    folders).
"""
import sys
from pathlib import Path

# Run as a script, Python puts this folder first on the path, where config.py and utils.py would shadow the
# shared ones: the project folder takes its place (gpt2.* and the shared library are imported from there).
if Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from gpt2.flags import classifier_settings, parse_classifier  # noqa: E402
from gpt2.sentiment import GPT2SentimentClassifier, GPT2SentimentPipeline  # noqa: E402
from minbert.pipelines.classifier import run_classifier  # noqa: E402
from utils import main_guard  # noqa: E402

__all__ = ["GPT2SentimentClassifier", "get_args", "train", "main"]


def get_args(argv=None):
    return parse_classifier(argv)


def train(args, on_epoch=None):
    """Train one model per --datasets entry and write its predictions; returns one result per dataset."""
    return run_classifier(classifier_settings(args), on_epoch, GPT2SentimentPipeline)


def main(argv=None, on_epoch=None):
    return train(get_args(argv), on_epoch)


if __name__ == "__main__":
    main_guard(main)
