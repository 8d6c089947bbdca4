"""minbert/cli.py: a MinbertError, Ctrl-C and running out of memory are one line each (another error keeps its
traceback); a closed pipe stops nothing; progress lines without a terminal. (The scripts' own cases, in a
process: tests/test_utils.py.)"""
import signal
import subprocess
import sys

import pytest
import torch

from minbert import cli
from minbert.cli import PipeSafe, Progress, main_guard, set_interrupt_hint
from tests.course import ROOT


def test_a_closed_pipe_drops_the_output_and_nothing_else(capsys):
    """In the process: a write meeting a closed pipe, and every later one, is dropped, and main() goes on."""
    class Closed:
        def write(self, text):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")
    steps = []

    def main():
        sys.stdout = PipeSafe(Closed())
        for i in range(3):
            print(f"line {i}")
            steps.append(i)
        return "done"
    assert main_guard(main) == "done" and steps == [0, 1, 2]


def test_ctrl_c_before_any_checkpoint_says_so(capsys):
    set_interrupt_hint(None)

    def main():
        raise KeyboardInterrupt
    with pytest.raises(SystemExit):
        main_guard(main)
    assert capsys.readouterr().err.strip() == f"interrupted: {cli.NOTHING_YET}"


# A finalizer a Ctrl-C lands in, as one lands in importlib's module-lock clean-up while torch loads
_IN_A_FINALIZER = "class A:\n    def __del__(self):\n        raise KeyboardInterrupt\nA()\nprint('went on')"


@pytest.mark.parametrize("code, status, last_line", [
    ("raise KeyboardInterrupt", 130, f"interrupted: {cli.NOTHING_YET}"),  # as main_guard says it
    (_IN_A_FINALIZER, 130, f"interrupted: {cli.NOTHING_YET}"),  # Python would ignore it and go on
    ("raise ValueError('a bug')", 1, "ValueError: a bug"),  # anything else keeps its traceback
])
def test_ctrl_c_before_main_guard_runs_is_one_line_too(code, status, last_line):
    """A Ctrl-C while a script's imports still run (torch's take seconds) is met before main_guard: the hooks
    minbert.cli sets on import say main_guard's line and stop the command. A process, since the interpreter is
    what prints."""
    out = subprocess.run([sys.executable, "-c", f"import minbert.cli\n{code}"], cwd=ROOT, capture_output=True,
                         text=True)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == status and lines[-1] == last_line
    assert (len(lines) == 1) == (status == 130) and "went on" not in out.stdout


# A project script's process (its __main__ a file of the project) that gets a Ctrl-C while it starts, then (when
# the start survives it) once main_guard runs: a `finally` shows whether a KeyboardInterrupt unwound main(). It
# sets Ctrl-C as Python's start-up does in a terminal, whatever the suite inherited (a job started in the
# background with `&` ignores Ctrl-C, and so do the processes it starts), or as such a job has it.
_SCRIPT = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.{disposition})
sys.modules["__main__"].__file__ = {script!r}
import minbert.cli
if {while_starting}:
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)
    except KeyboardInterrupt:  # as a compiled module's start-up can swallow it
        pass
    print("went on")

def main():
    try:
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.5)
    finally:
        print("main() unwound")
minbert.cli.main_guard(main if {in_main} else lambda: print("done"))
if {after}:
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.5)
    print("went on")
"""


@pytest.mark.parametrize("when, said, printed", [
    ("while_starting", cli.NOTHING_YET, ""),
    ("in_main", cli.NOTHING_YET, "main() unwound\n"),
    ("after", "after the command had finished: what it printed and wrote is complete", "done\n"),
])
def test_a_ctrl_c_while_a_script_starts_ends_it_at_once_and_in_main_it_unwinds(when, said, printed):
    """While a script loads its packages a Ctrl-C ends the process there and then (raised inside a compiled
    module's start-up, Python's KeyboardInterrupt could be swallowed and the command run on); once main_guard
    runs, it is Python's KeyboardInterrupt again, which unwinds main() (runs save their state on the way); after
    main() has returned, it says the work is complete (the process would otherwise die of it without a word)."""
    out = _run_script(when, "default_int_handler")
    assert out.returncode == 130 and out.stderr.strip() == f"interrupted: {said}", out.stderr
    assert out.stdout == printed


_SHUTDOWN = """
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
sys.modules["__main__"].__file__ = {script!r}
import minbert.cli

class Slow:  # torch's own teardown takes this long at the end of a real run
    def __del__(self):
        os.write(1, b"finalizing\\n")
        time.sleep(1)
slow = Slow()

def main():
    if {interrupted}:
        raise KeyboardInterrupt
minbert.cli.main_guard(main)
"""


@pytest.mark.parametrize("interrupted, status", [(False, 0), (True, 130)])
def test_a_ctrl_c_while_the_interpreter_shuts_down_is_not_a_death_by_the_signal(interrupted, status):
    """Python resets its own Ctrl-C handler early in its shutdown: a Ctrl-C after that (a user pressing twice, or
    once as a finished run exits) had killed the process by the signal, exit -2, after its line said otherwise."""
    code = _SHUTDOWN.format(script=str(ROOT / "classifier.py"), interrupted=interrupted)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline() == "finalizing\n"  # waits for the shutdown, not for a clock
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == status, err
    assert err.strip() == (f"interrupted: {cli.NOTHING_YET}" if interrupted else "")


def test_a_script_that_ignores_ctrl_c_is_left_to_ignore_it():
    """A command started in the background (`python classifier.py ... &`) ignores Ctrl-C, as the shell meant: its
    start-up sets no handler of ours, so a Ctrl-C meant for the foreground does not stop it."""
    out = _run_script("while_starting", "SIG_IGN")
    assert out.returncode == 0 and out.stderr == "" and out.stdout == "went on\ndone\n", out.stderr


def _run_script(when, disposition):
    code = _SCRIPT.format(script=str(ROOT / "classifier.py"), disposition=disposition,
                          **{k: k == when for k in ("while_starting", "in_main", "after")})
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)


@pytest.mark.parametrize("error, expected", [
    (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 79.1 GiB"),
     "out of memory: torch could not allocate 20.00 GiB on the GPU"),
    (MemoryError(), "out of memory: an allocation failed on this machine"),
])
def test_out_of_memory_on_a_gpu_or_in_python_is_one_line(capsys, error, expected):
    def main():
        raise error
    with pytest.raises(SystemExit) as e:
        main_guard(main)
    assert e.value.code == 2 and capsys.readouterr().err.startswith(f"error: {expected}; ")


def test_another_runtime_error_keeps_its_traceback():
    def main():
        raise RuntimeError("a bug")
    with pytest.raises(RuntimeError, match="a bug"):
        main_guard(main)


def test_progress_lines_without_a_terminal(capsys, monkeypatch):
    clock = iter([100.0, 101.0, 130.0, 161.5])  # a scripted clock: the test does not depend on the machine's speed
    monkeypatch.setattr(cli.time, "perf_counter", lambda: next(clock))
    p = Progress("sst epoch 0", 10, every=60.0, terminal=False, first=0.0)
    p.update(2, tokens=1000, mean_loss=lambda: 1.5)  # 1 s in: the first line
    p.update(3, tokens=1500, mean_loss=lambda: 1.4)  # 29 s after it: within the minute, no second line
    p.update(5, tokens=2500, mean_loss=lambda: 1.3)  # 60.5 s after it: the next line
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[0] == "sst epoch 0: step 2/10, loss 1.5000, 1000 tokens/s, 0m01s elapsed, about 0m04s left"
    assert lines[1].startswith("sst epoch 0: step 5/10, loss 1.3000, ") and "1m01s elapsed" in lines[1]
    monkeypatch.undo()
    Progress("x", 10, every=60.0, terminal=True, first=0.0).update(2)  # a terminal has tqdm's bar instead
    assert capsys.readouterr().out == ""


def test_the_time_left_follows_the_pace_since_the_last_line_not_a_slow_start(capsys, monkeypatch):
    """A first step of 30 s (compiling), then 0.1 s a step: the second line's estimate is the 0.1 s pace."""
    clock = iter([0.0, 30.0, 90.0])
    monkeypatch.setattr(cli.time, "perf_counter", lambda: next(clock))
    p = Progress("mt epoch 0", 1000, every=60.0, terminal=False, first=10.0)
    p.update(1)
    p.update(601)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].endswith("0m30s elapsed, about 8h19m left")  # one slow step is all it knows yet
    assert lines[1] == "mt epoch 0: step 601/1000, 1m30s elapsed, about 0m39s left"  # 399 steps at 0.1 s


@pytest.mark.parametrize("argv, said", [
    (["--out", ""], "--out '': empty; give a value, or leave the flag out"),
    (["--out="], "--out=: empty; give a value, or leave the flag out"),
    (["--out", " "], "--out ' ': blank; give a value, or leave the flag out"),
    (["--out= \t"], "--out=' \\t': blank; give a value, or leave the flag out"),
    (["--out", "x", ""], "'': an empty argument; give a value, or leave it out"),
    (["--out", "x", "  "], "'  ': a blank argument; give a value, or leave it out"),
    (["--", ""], "'': an empty argument; give a value, or leave it out"),
    (["--", " "], "' ': a blank argument; give a value, or leave it out"),
    (["--on", ""], "'': an empty argument; give a value, or leave it out"),  # a switch takes no value
    (["--on="], "--on=: --on is a switch and takes no value; give --on alone, or leave it out"),
    (["--on=yes"], "--on=yes: --on is a switch and takes no value; give --on alone, or leave it out"),
    (["--many", "sst", " "], "--many ' ': blank; give a value, or leave the flag out"),  # a later value, named
    (["--many", "a", "b", ""], "--many '': empty; give a value, or leave the flag out"),
    (["--many=a", ""], "'': an empty argument; give a value, or leave it out"),  # --many's value was inside it
])
def test_an_empty_or_blank_value_is_refused_before_it_becomes_a_folder(argv, said):
    """`--out ''` would be Path(''), the folder the command runs in, and `--out ' '` a folder named by a space:
    refused, as `=` with nothing (or spaces) after it, an empty or blank argument, and a value given to a switch
    are; a value, even one that looks odd, is not."""
    parser = cli.Parser(prog="p")
    parser.add_argument("--out")
    parser.add_argument("--on", action="store_true")
    parser.add_argument("--many", nargs="+")
    parser.add_argument("rest", nargs="*")
    with pytest.raises(cli.MinbertError) as e:
        parser.parse_args(argv)
    assert str(e.value) == f"p: {said}"
    assert parser.parse_args(["--out", " x", "--", "-"]).out == " x"
    assert parser.parse_args(["--on", "--out= x"]).on


def repeat_parser():
    parser = cli.Parser(prog="p")
    parser.add_argument("--epochs", "--n_epochs", type=int, default=1)
    parser.add_argument("--on", action="store_true")
    parser.add_argument("--pair", nargs=2)
    parser.add_argument("--maybe", nargs="?", const="all")
    group = parser.add_argument_group("data")  # a group's flags follow the same rule as the parser's own
    group.add_argument("--datasets", nargs="+", default=["sst", "cfimdb"])
    group.add_argument("--seeds", type=int, nargs="*", default=[1])
    parser.add_argument("--candidate", nargs="+", action="append")
    parser.add_argument("--verbose", "-v", action="count", default=0)
    parser.add_argument("runs", nargs="*")
    return parser


@pytest.mark.parametrize("argv, said", [
    (["--epochs", "3", "--epochs", "5"], "--epochs given twice (3, then 5)"),
    (["--epochs=3", "--epochs", "3"], "--epochs given twice (3, then 3)"),  # nothing lost, but still a slip
    (["--epochs", "3", "--n_epochs", "5"], "--epochs and --n_epochs: two spellings of one setting, both given"),
    (["--on", "--datasets", "sst", "--on"], "--on given twice:"),
    (["--pair", "a", "b", "--pair", "c", "d"], "--pair given twice (a b, then c d)"),
    (["--maybe", "--maybe", "x"], "--maybe given twice (bare, then x)"),
])
def test_a_flag_given_twice_is_refused_in_one_line_naming_it(argv, said):
    """argparse keeps the last value of a flag given twice and drops the first without a word."""
    with pytest.raises(cli.MinbertError) as e:
        repeat_parser().parse_args(argv)
    assert str(e.value).startswith(f"p: {said}") and "\n" not in str(e.value)
    assert str(e.value).endswith("give it once") or str(e.value).endswith("give one")


def test_a_flag_of_several_values_given_twice_takes_every_value():
    """nargs "+" or "*": each occurrence adds its values (the first replaces the default, which is never added
    to); append and count collect by design; a flag after `--` is a positional value, not a repeat."""
    args = repeat_parser().parse_args(["--datasets", "sst", "--seeds", "2", "--datasets", "cfimdb", "sts",
                                       "--seeds", "3", "4", "--candidate", "a", "--candidate", "b", "c", "-vv",
                                       "-v", "--epochs", "2", "--", "--epochs", "3"])
    assert (args.datasets, args.seeds, args.candidate, args.verbose) == (["sst", "cfimdb", "sts"], [2, 3, 4],
                                                                         [["a"], ["b", "c"]], 3)
    assert args.epochs == 2 and args.runs == ["--epochs", "3"]
    again = repeat_parser()
    assert again.parse_args(["--datasets", "cfimdb"]).datasets == ["cfimdb"]  # the default replaced, not added to
    assert again.parse_args([]).datasets == ["sst", "cfimdb"]  # and each parse starts afresh
    assert again.parse_args(["--seeds"]).seeds == []


@pytest.mark.parametrize("argv, said", [
    (["--datasets", "sst", "sst"], "--datasets: sst given twice"),
    (["--datasets", "sst", "--datasets", "cfimdb", "sst"], "--datasets: sst given twice"),
    (["--seeds", "2", "02"], "--seeds: 2 given twice"),  # the same value, however spelled
])
def test_a_value_given_twice_to_a_flag_of_several_values_is_refused(argv, said):
    """It would act once (a data set trained once, a beam width timed once): a slip, said in one line."""
    with pytest.raises(cli.MinbertError) as e:
        repeat_parser().parse_args(argv)
    assert str(e.value) == f"p: {said}; each value acts once: give it once"


def test_positionals_may_follow_a_flag_as_they_may_precede_it():
    """`ensemble.py A --out O B`: B is a member as A is (argparse alone calls B unrecognized)."""
    args = repeat_parser().parse_args(["a", "--epochs", "2", "b", "--on", "c"])
    assert (args.runs, args.epochs, args.on) == (["a", "b", "c"], 2, True)
    import ensemble
    import report
    assert ensemble.build_parser().parse_args(["A", "--out", "O", "B"]).members == ["A", "B"]
    assert report.build_parser().parse_args(["--compare", "a", "--seed", "3", "b"]).runs == ["a", "b"]


@pytest.mark.parametrize("argv, said", [
    (["--scor", "p", "g"], "unrecognized arguments: --scor (did you mean --score?)"),  # not: --score is required
    (["--score", "p", "g", "--verbos"], "unrecognized arguments: --verbos (did you mean --verbose?)"),
    (["--score", "p", "g", "--colour=red"], "unrecognized arguments: --colour=red"),
    (["--ver"], "unrecognized arguments: --ver (did you mean --verbose?)"),  # no abbreviation: named, not taken
])
def test_an_unknown_flag_is_named_first_with_the_nearest_known_one(argv, said):
    parser = cli.Parser(prog="p")
    parser.add_argument("--score", nargs=2, required=True)
    parser.add_argument("--verbose", action="store_true")
    with pytest.raises(cli.MinbertError) as e:
        parser.parse_args(argv)
    assert str(e.value) == f"p: {said}"


def test_a_near_miss_is_named_among_several_or_absent_flags_and_a_value_with_a_space_is_a_value():
    parser = cli.Parser(prog="p", absent={"--prefix_length": "(BERT's) not available here"})
    parser.add_argument("--sampler")
    parser.add_argument("--sample_rate")
    parser.add_argument("--name")
    for argv, said in ((["--samp", "x"], "--samp (did you mean --sampler or --sample_rate?)"),
                       (["--prefix_len", "3"], "--prefix_len (did you mean --prefix_length?)")):
        with pytest.raises(cli.MinbertError) as e:
            parser.parse_args(argv)
        assert str(e.value) == f"p: unrecognized arguments: {said}"
    assert parser.parse_args(["--name", "-my model"]).name == "-my model"  # argparse's value, as before


def test_every_command_parses_its_flags_with_the_project_parser():
    """The rule above (a flag given twice, a blank value) holds in every command only if each builds cli.Parser:
    no script, tool or library module builds a plain argparse parser."""
    plain = [str(p.relative_to(ROOT)) for p in sorted(ROOT.rglob("*.py"))
             if not {".venv", "tests", ".git"} & set(p.relative_to(ROOT).parts)
             and "argparse.ArgumentParser(" in p.read_text() and p != ROOT / "minbert" / "cli.py"]
    assert plain == []
