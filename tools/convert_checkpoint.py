"""Convert a checkpoint of the earlier format (the whole argparse namespace pickled, with
pathlib paths) into the current one (minbert/runs/checkpoint.py), read through the restricted
loader: nothing in the old file runs.

    python tools/convert_checkpoint.py --convert OLD.pt NEW.pt
"""
import sys
from pathlib import Path

if not __package__:  # run as a file (python tools/NAME.py): the project folder first, not tools/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# first, before torch loads: a Ctrl-C meanwhile is one line (minbert/cli.py)
from minbert.cli import MinbertError, Parser, main_guard  # noqa: E402

from minbert.runs.checkpoint import VERSION, load_checkpoint, save_checkpoint  # noqa: E402
from minbert.runs.outputs import check_file  # noqa: E402


def build_parser():
    ap = Parser(prog="tools/convert_checkpoint.py",
                description="Convert a checkpoint of the earlier format into the current one.")
    ap.add_argument("--convert", nargs=2, metavar=("OLD.pt", "NEW.pt"), required=True,
                    help="read OLD.pt (the earlier format) and write it as NEW.pt in the current one")
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    src, dest = args.convert
    if Path(dest).exists() or Path(dest).is_symlink():
        raise MinbertError(f"{dest}: exists; the converter does not overwrite files")
    check_file(dest, "--convert NEW.pt", inputs=[("OLD.pt", src)])  # not in a run's folder, nor in minbert/
    state = load_checkpoint(src)
    state.pop("converted_from", None)
    save_checkpoint(dest, state)
    print(f"{dest}: {state['pipeline']} checkpoint (epoch {state['epoch']}) in format version {VERSION}")


if __name__ == "__main__":
    main_guard(main)
