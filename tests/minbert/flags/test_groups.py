"""flags/groups.py: the run folder's action (the earlier --checkpoint PATH names the run folder and the best
checkpoint, two flags naming different folders are refused, two naming the same folder taken) and the flags prepare_submit.py and
report.py share."""
import re
from pathlib import Path

import pytest

from minbert.flags import parsers
from minbert.flags.groups import add_zip_flags
from utils import MinbertError, Parser


def test_the_earlier_checkpoint_flag_names_the_run_folder_and_the_best_checkpoint():
    ap = parsers.parser("multitask", prog="p")
    args = ap.parse_args(["--checkpoint", "somewhere/best.pt"])
    assert (args.run_dir, args.checkpoint_name) == ("somewhere", "best")
    assert ap.parse_args([]).checkpoint_name is None


@pytest.mark.parametrize("argv, given", [
    (["--run_name", "a", "--run_dir", "b"], "--run_name a"), (["--run_dir", "b", "--run_name", "a"], "b"),
    (["--checkpoint_dir", "c", "--run_dir", "b"], "c"), (["--run_dir", "b", "--checkpoint_dir", "c"], "b"),
    (["--checkpoint_dir", "c", "--run_name", "a"], "c"), (["--checkpoint", "c/mt.pt", "--run_name", "a"], "c"),
    (["--run_dir", "b", "--checkpoint", "c/mt.pt"], "b"),
])
def test_the_run_folder_given_twice_is_refused(argv, given):
    """--run_name, --run_dir and their earlier spellings name one folder: argparse would keep one without a word."""
    import ensemble
    ap = parsers.parser("multitask" if "--checkpoint" in argv else "classifier", prog="p")
    flag = [a for a in argv if a.startswith("--")][1]
    with pytest.raises(MinbertError, match=rf"p: argument {flag}: the run's folder is given already \({given}\): "
                                           rf"--run_name, --run_dir and --checkpoint(_dir)? each name it; give one"):
        ap.parse_args(argv)
    if "--checkpoint_dir" not in argv and "--checkpoint" not in argv:  # the scripts refuse it as the parser does
        import classifier
        with pytest.raises(MinbertError, match=rf"classifier.py: argument {flag}: the run's folder is given already"):
            classifier.get_args(argv)
        with pytest.raises(MinbertError, match=rf"ensemble.py: argument {flag}: the run's folder is given already "
                                               rf"\({given}\): --run_name and --run_dir each name it; give one"):
            ensemble.main(["m1", *argv])


@pytest.mark.parametrize("argv, said", [
    (["--run_dir", "b", "--run_dir", "c"], "--run_dir given twice (b, then c)"),
    (["--checkpoint", "c/a.pt", "--checkpoint", "c/b.pt"], "--checkpoint given twice (c/a.pt, then c/b.pt)"),
    (["--run_name", "a", "--run_name", "b"], "--run_name given twice (a, then b)"),
    (["--run_name", "r", "--run_name", "r"], "--run_name given twice (r, then r)"),
])
def test_one_folder_flag_typed_twice_is_refused_as_any_flag_is(argv, said):
    with pytest.raises(MinbertError, match=rf"^p: {re.escape(said)}: a flag acts once"):
        parsers.parser("multitask", prog="p").parse_args(argv)


@pytest.mark.parametrize("argv, folder", [
    (["--checkpoint", "ck/mt.pt", "--resume", "--run_dir", "ck"], ("", "ck", "mt")),
    (["--run_dir", "ck/", "--checkpoint", "ck/mt.pt"], ("", "ck", "mt")),
])
def test_two_spellings_naming_the_same_run_folder_are_taken(argv, folder):
    ap = parsers.parser("multitask", prog="p")
    args = ap.parse_args(argv)
    assert (args.run_name, args.run_dir and str(Path(args.run_dir)), args.checkpoint_name) == folder


def test_prepare_submit_takes_runs_to_publish_a_mix_and_a_backup():
    ap = Parser(prog="z")
    add_zip_flags(ap)
    assert vars(ap.parse_args([])) == {"publish": (), "mixed": False, "backup": False}
    args = ap.parse_args(["--publish", "runs/a", "runs/b", "--mixed", "--backup"])
    assert (args.publish, args.mixed, args.backup) == (["runs/a", "runs/b"], True, True)
    assert ap.parse_args(["--publish", "runs/a", "--publish", "runs/b"]).publish == ["runs/a", "runs/b"]
    with pytest.raises(MinbertError, match="^z: --backup given twice"):
        ap.parse_args(["--backup", "--backup"])
    with pytest.raises(MinbertError, match="^z: --backup=: --backup is a switch and takes no value"):
        ap.parse_args(["--backup="])
    with pytest.raises(MinbertError, match="expected at least one argument"):
        ap.parse_args(["--publish"])
