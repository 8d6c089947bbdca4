"""Build GPT-2, Part 2: paraphrase detection on Quora as a cloze task (handout section 7.1).

    cd gpt2 && python paraphrase_detection.py --pretrained FOLDER [--use_gpu] [--epochs N] [--lr LR]

Each pair becomes the question 'Is "Q2" a paraphrase of "Q1"? Answer yes or no:', and the model answers with
whichever of " yes" and " no" its LM head scores higher (gpt2/paraphrase.py). The run trains the whole model,
keeps the best dev epoch and writes predictions/para-dev-output.csv and para-test-output.csv, through
minbert's shared pipeline (run folders under runs/, --resume, the speed and recipe flags)."""
import sys
from pathlib import Path

# Run as a script, Python puts this folder first on the path, where config.py and utils.py would shadow the
# shared ones: the project folder takes its place (gpt2.* and the shared library are imported from there).
if Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from gpt2.flags import classifier_settings, parse_paraphrase  # noqa: E402
from gpt2.paraphrase import GPT2ParaphraseCloze, GPT2ParaphrasePipeline  # noqa: E402
from minbert.pipelines.classifier import run_classifier  # noqa: E402
from utils import main_guard  # noqa: E402

__all__ = ["GPT2ParaphraseCloze", "get_args", "train", "main"]


def get_args(argv=None):
    return parse_paraphrase(argv)


def train(args, on_epoch=None):
    """Train on Quora, keep the best dev epoch and write the two prediction files; returns [its result]."""
    return run_classifier(classifier_settings(args), on_epoch, GPT2ParaphrasePipeline)


def main(argv=None, on_epoch=None):
    return train(get_args(argv), on_epoch)


if __name__ == "__main__":
    main_guard(main)
