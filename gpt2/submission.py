"""What Build GPT-2's submission zip holds (gpt2/prepare_submit.py; the zip itself is minbert/submit.py's,
shared with minBERT): the handout's listed code and prediction files, the packages the scripts import, and a
check that the generated sonnets complete every held-out sonnet in 14 lines."""
from gpt2.sonnets import LINES, read_sonnets
from minbert.cli import MinbertError
from minbert.submit import Project

# The handout lists Part 1's files by these names; Part 2's are the cloze task's and the sonnets'.
PART1 = [f"finetune-{d}-{s}-out.csv" for d in ("sst", "cfimdb") for s in ("dev", "test")]
PART2 = ["para-dev-output.csv", "para-test-output.csv", "generated_sonnets.txt"]
CODE = ["gpt2/modules/attention.py", "gpt2/modules/gpt2_layer.py", "gpt2/models/gpt2.py",
        "gpt2/classifier.py", "optimizer.py"]


def sonnet_problem(path, data_dir):
    """Why a generated-sonnets file does not complete every held-out sonnet in LINES lines, or None."""
    held = data_dir / "sonnets_held_out.txt"
    if not held.is_file():
        raise MinbertError(f"{held}: not found, so {path} cannot be checked (pass --data_dir)")
    wanted, got = [n for n, _ in read_sonnets(held)], read_sonnets(path)
    numbers = [n for n, _ in got]
    if numbers != wanted:
        missing = [n for n in wanted if n not in numbers]
        extra = [n for n in numbers if n not in wanted]
        said = ([f"{len(missing)} of {held.name}'s {len(wanted)} missing (first: {missing[0]})"] if missing else []) + (
            [f"{len(extra)} not in it (first: {extra[0]})"] if extra else [])
        return "; ".join(said) or f"its {len(numbers)} sonnets in another order than {held.name}'s"
    short = [n for n, t in got if len(t.split("\n")) != LINES]  # lines as read_sonnets splits them
    return f"sonnet {short[0]} is not {LINES} lines" if short else None


GPT2 = Project("Build GPT-2", "gpt2/predictions", {"1": PART1, "2": PART2}, {"1": CODE}, ("minbert", "gpt2"),
               "run gpt2/classifier.py (Part 1), or gpt2/paraphrase_detection.py and "
               "gpt2/sonnet_generation.py (Part 2) first", checks={".txt": sonnet_problem},
               checked="the ids of its split, or for the sonnets every "
                       f"held-out sonnet completed in {LINES} lines",
               units={"1": [tuple(PART1[:2]), tuple(PART1[2:])], "2": [tuple(PART2[:2]), tuple(PART2[2:])]},
               script="gpt2/prepare_submit.py", pipelines=("gpt2-classifier", "gpt2-paraphrase", "gpt2-sonnet"))
