"""The flags the other commands share (prepare_submit.py's of either project, report.py's --backup) and the run
folder's action, which the training scripts' rows (runtime_rows.py) take too."""
import argparse
from pathlib import Path

from minbert.runs.folders import check_path_name, check_run_name


def add_zip_flags(ap):
    """prepare_submit.py's (minBERT's and Build GPT-2's): which runs' files go in, a mix allowed, --backup."""
    ap.add_argument("--publish", nargs="+", default=(), metavar="RUN_DIR",
                    help="first copy these run folders' prediction files to the handout's paths (a finished "
                         "run's set, put back as the run published it)")
    ap.add_argument("--mixed", action="store_true",
                    help="zip even when files one model writes together come from different runs (or partly "
                         "from no run found); without it such a mix is refused, naming each file's run")
    add_backup_flag(ap)


BACKUP_HELP = ("where an output would replace a file no run wrote (or one changed since), keep that file as "
               "NAME.DATE.bak beside it instead of stopping (minbert/runs/outputs.py)")


def add_backup_flag(ap):
    ap.add_argument("--backup", action="store_true", help=BACKUP_HELP)


class RunFolder(argparse.Action):
    """--run_name, --run_dir and their earlier spellings --checkpoint_dir (Part 1) and --checkpoint PATH
    (Part 2: the folder is PATH's, the best checkpoint PATH itself) all say where the run's files go. Of
    two naming different folders, argparse would keep one and drop the other without a word: the second is
    refused. Two of them naming the same folder are taken (`--checkpoint ck/mt.pt --resume --run_dir ck`:
    nothing is dropped); one flag typed twice is refused as any is (cli.Parser)."""

    weighs_spellings = True  # cli.Parser leaves two spellings of the folder to this action

    def __call__(self, parser, namespace, value, option_string=None):
        # '' would fall back on a new timestamped folder without a word; a name has its own limits (check_run_name)
        (check_run_name if option_string == "--run_name" else check_path_name)(value, option_string)
        name = value if option_string == "--run_name" else ""
        folder, stem = (str(Path(value).parent), Path(value).stem) if option_string == "--checkpoint" else (
            None if name else value, None)
        given = (getattr(namespace, "run_name", ""), getattr(namespace, "run_dir", None),
                 getattr(namespace, "checkpoint_name", None))
        if any(given[:2]) and not self.same(given, name, folder, stem):
            spellings = [o for o in ("--run_name", "--run_dir", "--checkpoint_dir", "--checkpoint")
                         if o in parser._option_string_actions]
            raise argparse.ArgumentError(self, "the run's folder is given already "
                                               f"({f'--run_name {given[0]}' if given[0] else given[1]}): "
                                               f"{', '.join(spellings[:-1])} and "
                                               f"{spellings[-1]} each name it; give one")
        if name:
            namespace.run_name = name
        else:
            namespace.run_dir = folder
        if stem is not None:
            namespace.checkpoint_name = stem

    @staticmethod
    def same(given, name, folder, stem):
        """Whether a flag naming `name` (under runs/) or `folder` (and the best checkpoint `stem`) names the
        folder (and checkpoint) `given` (run_name, run_dir, checkpoint_name) already named."""
        if given[0] or name:
            return given[0] == name
        return Path(given[1]) == Path(folder) and (None in (given[2], stem) or given[2] == stem)
