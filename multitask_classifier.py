"""Part 2: one BERT for sentiment (SST), paraphrase (Quora) and similarity (STS) (handout section 5).

    python multitask_classifier.py --epochs 3 --pretrained all-minilm-l6-v2 [--use_gpu]
    python multitask_classifier.py --eval_only runs/NAME/multitask.pt      # test_multitask alone

The starter's names are here:
  - MultitaskBERT (forward, predict_sentiment, predict_paraphrase, predict_similarity):
    minbert/tasks/multitask.py;
  - train_multitask: trains, keeps the best dev mean and writes the six leaderboard files from it;
  - test_multitask: rewrites them from a saved checkpoint (--eval_only), a run's or save_model's;
  - get_args: the flags (declared in minbert/flags/table.py, every one in docs/flags.md);
  - for a loop of one's own: save_model, seed_everything, and the constants TQDM_DISABLE, BERT_HIDDEN_SIZE,
    N_SENTIMENT_CLASSES.
What a run does step by step is minbert/pipelines/multitask.py; docs/architecture.md maps the rest.
"""
from config import BertConfig
from minbert.flags.settings import multitask_settings, parse_multitask
from minbert.pipelines import multitask as part2
from minbert.runs.checkpoint import save_model as save_checkpoint_file
from minbert.tasks.multitask import N_SENTIMENT, MultitaskBERT
from utils import TQDM_DISABLE, MinbertError, main_guard, seed_everything

__all__ = ["TQDM_DISABLE", "seed_everything", "BERT_HIDDEN_SIZE", "N_SENTIMENT_CLASSES", "MultitaskBERT",
           "save_model", "train_multitask", "test_multitask", "get_args", "main"]

# bert-base-uncased's width (BertConfig's default), the handout's model; the heads take the width of the
# checkpoint --pretrained names (all-minilm-l6-v2's is 384)
BERT_HIDDEN_SIZE = BertConfig().hidden_size
N_SENTIMENT_CLASSES = N_SENTIMENT


def save_model(model, optimizer, args, config, filepath):
    """Save `model` (its spec and trained tensors) and `optimizer`'s state as a checkpoint --eval_only reads."""
    # `config` is the spec the model holds, which rebuilds it; `args` are a run's to record, not a model's
    return save_checkpoint_file(filepath, model, optimizer, by="multitask_classifier.py save_model")


def get_args(argv=None):
    """The flags, parsed and checked (minbert/flags/)."""
    return parse_multitask(argv)


def train_multitask(args, on_epoch=None):
    """Train, keep the best dev mean and write the six leaderboard files (with --eval_only:
    re-score instead). `on_epoch(epoch, dev mean)` is called after each epoch's evaluation
    (sweep.py's pruner may raise there)."""
    return part2.run_multitask(multitask_settings(args), on_epoch)


def test_multitask(args):
    """Rewrite the six leaderboard files from the checkpoint --eval_only names."""
    if not args.eval_only:
        raise MinbertError("test_multitask re-scores a saved model: give --eval_only runs/NAME/multitask.pt")
    return part2.run_multitask(multitask_settings(args))


def main(argv=None, on_epoch=None):
    return train_multitask(get_args(argv), on_epoch)


if __name__ == "__main__":
    main_guard(main)
