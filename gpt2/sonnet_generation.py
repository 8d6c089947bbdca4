"""Build GPT-2, Part 2: fine-tune GPT-2 on Shakespeare's sonnets, then complete
held-out ones (handout section 7).

    cd gpt2 && python sonnet_generation.py --pretrained FOLDER [--use_gpu] [--temperature 1.2] [--top_p 0.9]
    cd gpt2 && python sonnet_generation.py --pretrained FOLDER --decoding beam --num_beams 4

Training is next-token prediction on --sonnet_path; the best epoch is the one of the lowest perplexity
on the true dev sonnets. Each held-out sonnet is then completed from its first three lines to 14
lines through a key-value cache (gpt2/sonnets.py), sampled with temperature and top-p, greedily
(--decoding greedy) or by beam search (--decoding beam: --num_beams, --length_penalty,
--no_repeat_ngram_size): the test sonnets into predictions/generated_sonnets.txt (the handout's file),
the dev ones scored with chrF against the true sonnets. The run has its own folder
(runs/gpt2-sonnet-TIMESTAMP, --run_name / --run_dir) and --resume continues it."""
import sys
from pathlib import Path

# Run as a script, Python puts this folder first on the path, where config.py and utils.py would shadow the
# shared ones: the project folder takes its place (gpt2.* and the shared library are imported from there).
if Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from gpt2.flags import parse_sonnets, sonnet_settings  # noqa: E402
from gpt2.sonnet_pipeline import run_sonnets  # noqa: E402
from gpt2.sonnets import SonnetGPT  # noqa: E402
from utils import main_guard  # noqa: E402

__all__ = ["SonnetGPT", "get_args", "main"]


def get_args(argv=None):
    return parse_sonnets(argv)


def main(argv=None, on_epoch=None):
    return run_sonnets(sonnet_settings(get_args(argv)), on_epoch)


if __name__ == "__main__":
    main_guard(main)
