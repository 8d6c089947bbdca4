"""Further masked-LM pretraining of any --pretrained checkpoint on the task text (handout
5.3, "Additional Pretraining"), with BERT's next-sentence prediction beside it (--nsp WEIGHT).

    python pretrain.py --pretrained all-minilm-l6-v2 --out pretrained/minilm-tasks --epochs 3
    python pretrain.py --pretrained all-minilm-l6-v2 --out pretrained/minilm-nsp --nsp 1   # CFIMDB's reviews
    python multitask_classifier.py --pretrained pretrained/minilm-tasks ...

The text is every training sentence of SST, CFIMDB, Quora and STS, CFIMDB's reviews or the sonnets
(--corpus), or one sentence per line of --texts FILE; with --nsp the examples are sentence pairs from
documents (a review, a sonnet, or --texts' lines between blank lines). 5% is held out and scored
(masked-token and next-sentence accuracy) before training and after each epoch. --out is the run folder
(--resume continues it exactly) and, at the end, a checkpoint folder holding the best epoch. What runs:
minbert/pipelines/pretrain.py (the masking and the heads: minbert/tasks/mlm.py, the pairs:
minbert/tasks/nsp.py); the flags: minbert/flags/table.py (parsed by minbert/flags/settings.py).
"""
from minbert.flags.settings import parse_pretrain, pretrain_settings
from minbert.pipelines.pretrain import run_pretrain
from utils import main_guard


def main(argv=None):
    return run_pretrain(pretrain_settings(parse_pretrain(argv)))


if __name__ == "__main__":
    main_guard(main)
