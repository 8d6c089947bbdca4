"""What every command shares and needs no torch: the one-line error, the parser that raises it, how each flag
is spelled in messages, the entry guard that prints the error, a stream a closed pipe cannot kill, which rank
speaks, and progress lines without a terminal. Kept free of torch, whose import takes seconds, so that a
command that trains nothing (report.py) never loads it; utils.py re-exports it all beside the helpers that
need torch."""
import argparse
import atexit
import difflib
import os
import re
import signal
import sys
import threading
import time


class MinbertError(Exception):
    """A user-facing problem: printed as one line by `main_guard`, never as a traceback."""


class Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is a MinbertError: one line naming the flag, no usage dump, and no flag taken by
    an abbreviation. A flag given twice is refused, unless it takes several values (nargs "+" or "*"), and then
    every value acts: argparse alone keeps the last and drops the first without a word. `absent` ({flag: why})
    names flags this script leaves out on purpose (another backbone's levers): typed, each says why."""

    def __init__(self, *a, absent=None, **kw):
        kw.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        # no abbreviations: `--warmup 1` must not quietly become --warmup_ratio 1 (bench.py's flag typed to a
        # pipeline), nor a flag added later change what a shortened one means
        kw.setdefault("allow_abbrev", False)
        super().__init__(*a, **kw)
        self.register("action", None, _Store)  # argument groups share the registry: every plain flag is one
        self.register("action", "store", _Store)
        self.absent = dict(absent or {})

    def parse_args(self, args=None, namespace=None):
        argv = sys.argv[1:] if args is None else [str(a) for a in args]
        self.refuse_unknown(argv)
        self.refuse_empty(argv)
        self.refuse_repeated(argv)
        # positionals and flags in any order (`ensemble.py A --out O B`: B is a member, as A is); after `--` all
        # is positional anyway, and argparse's intermixed parse would drop the `--`
        intermix = "--" not in argv
        try:
            parsed, extras = (self.parse_known_intermixed_args if intermix else self.parse_known_args)(argv, namespace)
        except TypeError:  # a parser argparse cannot intermix (subcommands, a remainder)
            parsed, extras = self.parse_known_args(argv, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def refuse_unknown(self, argv):
        """A flag this parser does not know, named first: before a required flag it stands for is said to be
        missing (`--scor P G` is a slip for --score), with the nearest known spelling, or why a flag this script
        leaves out on purpose is absent."""
        for token in argv:
            if token == "--":
                break
            name = token.partition("=")[0]
            known = self._option_string_actions
            if (not re.match(r"--?[A-Za-z_]", name) or " " in name or name in known
                    or not name.startswith("--") and name[:2] in known):  # -vv, -xVALUE: argparse's short forms
                continue
            if name in self.absent:
                self.error(f"{name} {self.absent[name]}")
            longs = [o for o in [*known, *self.absent] if o.startswith("--")]
            near = [o for o in longs if o.startswith(name)] or difflib.get_close_matches(name, longs, 1, 0.75)
            guess = f" (did you mean {', '.join(near[:-1])} or {near[-1]}?)" if 1 < len(near) <= 4 else (
                f" (did you mean {near[0]}?)" if len(near) == 1 else "")
            self.error(f"unrecognized arguments: {token}{guess}")

    def parse_known_args(self, args=None, namespace=None):
        self.given_once = set()  # the flags of several values met so far in this parse (_Store)
        return super().parse_known_args(args, namespace)

    def refuse_empty(self, argv):
        """An empty or blank value (`--out ''`, `--out ' '`, `--study=`, or an empty argument) is a slip no flag
        means: as a path it would be the current folder (`--out ''` wrote a checkpoint there) or a folder named
        by spaces, as a name the default. A value given to a switch (`--backup=`, `--backup=yes`) is one too.
        Refused in one line naming the flag, before anything runs."""
        for i, token in enumerate(argv):
            if token == "--":
                break
            name, eq, value = token.partition("=")
            action = self._option_string_actions.get(name) if eq and name.startswith("-") else None
            if action is not None and action.nargs == 0:
                self.error(f"{token}: {name} is a switch and takes no value; give {name} alone, or leave it out")
            if eq and name.startswith("-") and not value.strip():
                said = f"{name}={value!r}: blank" if value else f"{token}: empty"
                self.error(f"{said}; give a value, or leave the flag out")
            if not token.strip():
                owner = self.owner(argv, i)
                what = "empty" if token == "" else "blank"
                if owner is not None:  # a value of the flag typed before it
                    self.error(f"{owner} {token!r}: {what}; give a value, or leave the flag out")
                self.error(f"{token!r}: {'an' if what == 'empty' else 'a'} {what} argument; give a value, or leave it out")
        for token in argv[argv.index("--") + 1:] if "--" in argv else ():
            if not token.strip():
                self.error(f"{token!r}: {'an empty' if token == '' else 'a blank'} argument; give a value, or "
                           "leave it out")

    def owner(self, argv, i):
        """The flag whose value argv[i] is (the one typed before it, when it takes that many values), or None."""
        for j in range(i - 1, -1, -1):
            name, eq, _ = argv[j].partition("=")
            if eq and name in self._option_string_actions:
                return None  # --flag=VALUE: its value is inside it
            action = self._option_string_actions.get(argv[j])
            if action is None:
                continue
            wants = {None: 1, "?": 1, "+": i, "*": i}.get(action.nargs, action.nargs)
            return argv[j] if isinstance(wants, int) and i - j <= wants else None
        return None

    def refuse_repeated(self, argv):
        """A flag typed twice, or two spellings of one setting, in one line naming them (`--epochs 3 --epochs
        5`: argparse would run 5 epochs and drop the 3 without a word). A flag of several values (nargs "+" or
        "*") and one that collects (append, count) take every occurrence: each value acts."""
        seen = {}
        for i, token in enumerate(argv):
            if token == "--":  # what follows is positional
                break
            spelling, eq, value = token.partition("=")
            action = self._option_string_actions.get(spelling) if token.startswith("-") else None
            if action is None or action.nargs in ("+", "*") or isinstance(action, REPEATABLE):
                continue
            if not eq:  # a value, where the flag takes one, is the next argument
                taken = argv[i + 1:i + 1 + (1 if action.nargs in (None, "?") else action.nargs)]
                value = " ".join(taken[:next((k for k, t in enumerate(taken) if t in self._option_string_actions),
                                             len(taken))])
            if action.dest not in seen:
                seen[action.dest] = spelling, value
                continue
            first, before = seen[action.dest]
            if first != spelling and getattr(action, "weighs_spellings", False):
                continue  # an action that decides itself whether two spellings agree (flags/groups.py RunFolder)
            if first != spelling:
                self.error(f"{first} and {spelling}: two spellings of one setting, both given; give one")
            values = f" ({before or 'bare'}, then {value or 'bare'})" if before or value else ""
            self.error(f"{spelling} given twice{values}: a flag acts once (argparse would keep the last and drop "
                       "the first without a word); give it once")

    def error(self, message):
        raise MinbertError(f"{self.prog}: {message}")


# The actions that take every occurrence of their flag by design (argparse's append, extend, count), and help.
REPEATABLE = (argparse._AppendAction, argparse._AppendConstAction, argparse._ExtendAction, argparse._CountAction,
              argparse._HelpAction, argparse._VersionAction)


class _Store(argparse._StoreAction):
    """argparse's store, but a flag of several values (nargs "+" or "*") typed twice adds the second list to the
    first (`--datasets sst --datasets cfimdb` trains both) where argparse would keep the last. The first
    occurrence replaces the default, so a default list is never added to. A value given twice is refused: it
    would act once."""

    def __call__(self, parser, namespace, values, option_string=None):
        several = option_string is not None and self.nargs in ("+", "*")
        if several and self.dest in parser.given_once:
            values = [*getattr(namespace, self.dest), *values]
        elif several:
            parser.given_once.add(self.dest)
        if several:  # `--beams 2 2` would run 2 once: the second 2 does nothing
            twice = next((v for k, v in enumerate(values) if v in values[:k]), None)
            if twice is not None:
                parser.error(f"{option_string}: {twice} given twice; each value acts once: give it once")
        setattr(namespace, self.dest, values)


# The flags not typed as --DEST: the handout's hyphenated one, and the switches that turn something off (a row of
# kind "off" in minbert/flags/table.py). Here, apart from the rows, so that the commands that import no torch
# (report.py) name flags as they are typed; a flag row's spelling is read from here (flag.Flag.spelling).
SPELLED = {"fine_tune_mode": "--fine-tune-mode",
           **{dest: f"--no_{dest}" for dest in ("bucket", "foreach", "fused", "fast_dropout", "record_step",
                                                "tensorboard")}}


def flag_spelling(dest):
    """How the flag of argparse destination `dest` is typed, as every message names it."""
    return SPELLED.get(dest, f"--{dest}")


# What an interrupted run should be told: set by a pipeline each time it saves a resumable checkpoint. `retry`
# is the command that continues the run (e.g. "the same command plus --resume --run_name r"), which a failed
# write (a full disk) names too: once a run folder holds files, the plain same command is refused there.
_INTERRUPT_HINT = {"text": None, "retry": None}
# Said of a command stopped before it wrote anything: of this command alone (a run's earlier files are untouched).
NOTHING_YET = "this command had written nothing yet; what was there before is as it was"


def set_interrupt_hint(text, retry=None):
    _INTERRUPT_HINT.update(text=text, retry=retry)


def interrupt_retry():
    """The command that continues the run now going (None before a run has one)."""
    return _INTERRUPT_HINT["retry"]


class PipeSafe:
    """A stream whose reader may go away (`python classifier.py ... | head -3`): once a write meets the closed pipe,
    that write and every later one are dropped, so the run goes on to its end (its log file and outputs hold
    everything) instead of dying of BrokenPipeError half way, perhaps while it publishes its files."""

    def __init__(self, stream):
        self.stream, self.reader_gone = stream, False

    def write(self, text):
        if not self.reader_gone:
            try:
                return self.stream.write(text)
            except BrokenPipeError:
                self._drop()
        return len(text)

    def flush(self):
        if not self.reader_gone:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._drop()

    def _drop(self):
        self.reader_gone = True
        try:  # the descriptor now writes to /dev/null: the buffered text and the interpreter's last flush go there
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, self.stream.fileno())
            os.close(null)
        except (OSError, ValueError, AttributeError):
            pass

    def __getattr__(self, name):
        return getattr(self.stream, name)


def main_guard(main):
    """Run a script's main(): a MinbertError becomes one line on stderr and exit code 2; Ctrl-C becomes
    one line saying where the last completed checkpoint is and how to resume (exit code 130). Under
    torchrun only rank 0 says it (every rank meets the same bad flag or file). Output is line-buffered, so
    a log file or a batch system shows each line as it is printed, and a reader that stops reading (`| head`)
    stops nothing (PipeSafe)."""
    if signal.getsignal(signal.SIGINT) is _stop_at_once:  # the start is over: a Ctrl-C is Python's again
        signal.signal(signal.SIGINT, signal.default_int_handler)
    streams = sys.stdout, sys.stderr
    for stream in streams:
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(line_buffering=True)
    sys.stdout, sys.stderr = PipeSafe(sys.stdout), PipeSafe(sys.stderr)
    set_interrupt_hint(None)  # a command starts with nothing saved (an earlier one in this process said its own)
    try:
        return _guarded(main)
    finally:
        sys.stdout, sys.stderr = streams


def _guarded(main):
    rank0 = is_main()
    try:
        result = main()
        finish_distributed()
        if _running_a_project_script():
            signal.signal(signal.SIGINT, _stop_when_done)  # from here to the exit, a Ctrl-C stops nothing
            atexit.register(_ignore_ctrl_c)
        return result
    except MinbertError as e:
        if rank0:
            print(f"error: {e}", file=sys.stderr)
        _exit_quietly(2)
    except KeyboardInterrupt:
        if rank0:
            print(f"\ninterrupted: {_INTERRUPT_HINT['text'] or NOTHING_YET}", file=sys.stderr)
        _exit_quietly(130)
    except (MemoryError, RuntimeError) as e:
        line = out_of_memory(e)
        if line is None:
            raise  # a bug: its traceback is what a report needs
        rank = os.environ.get("RANK", "0")  # a rank runs out on its own, so each one says so
        print(f"error: {'' if rank == '0' else f'rank {rank}: '}{line}", file=sys.stderr)
        sys.exit(2)


# ----------------------------------------------------------------------------- Ctrl-C outside main()
# A script spends its first seconds importing torch and the rest, before main_guard runs. Python's own Ctrl-C
# there raises KeyboardInterrupt wherever it lands: mostly a traceback, but inside a compiled module's start-up
# (matplotlib's font library, say) it can be swallowed, so that the command runs on, or turn into an ImportError
# or a crash. Nothing is saved yet at that point, so while a project script starts (every script imports this
# module before any other package: tests/test_architecture.py), a Ctrl-C ends the process at once with
# main_guard's line; main_guard hands Ctrl-C back to Python, whose KeyboardInterrupt the runs turn into their
# checkpoint and resume line; once main() has returned, a Ctrl-C says the work is complete. The two hooks below
# catch what is left: a KeyboardInterrupt that still reaches the interpreter (a script run another way), and one
# Python would print as "ignored" (a finalizer) and carry on.

def _stop_at_once(signum, frame):
    _stop_interrupted()


def _stop_when_done(signum, frame):
    """A Ctrl-C after main() returned, while the interpreter shuts down: the work is done, and says so (without
    this, the process would die of the signal without a word)."""
    _stop_interrupted("after the command had finished: what it printed and wrote is complete")


def _interrupted_while_starting(kind, value, tb, _previous=sys.excepthook):
    if issubclass(kind, KeyboardInterrupt) and _not_at_a_prompt():
        _stop_interrupted()
    _previous(kind, value, tb)


def _interrupt_not_ignored(unraisable, _previous=sys.unraisablehook):
    if issubclass(unraisable.exc_type, KeyboardInterrupt) and _not_at_a_prompt():
        _stop_interrupted()
    _previous(unraisable)


def _ignore_ctrl_c():
    """The last moments of the interpreter's shutdown: Python resets a handler of its own to the default there,
    and a Ctrl-C then would kill the process by the signal (exit -2, the line said) where the work is done and
    its line printed. Ignored, it changes nothing (Python leaves an ignored signal ignored)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _exit_quietly(code):
    """sys.exit(code) once the line is printed: a second Ctrl-C meanwhile (a user pressing twice) adds
    nothing, and in a project script is ignored on the way out rather than killing it by the signal."""
    if _running_a_project_script():
        _ignore_ctrl_c()
    sys.exit(code)


def _not_at_a_prompt():
    return not hasattr(sys, "ps1") and not sys.flags.interactive


def _stop_interrupted(words=None):
    print(f"\ninterrupted: {words or _INTERRUPT_HINT['text'] or NOTHING_YET}", file=sys.stderr)
    for stream in sys.stdout, sys.stderr:
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader already gone (`| head`), or a stream closed
            pass
    os._exit(130)


def _running_a_project_script():
    """Whether this process runs one of the project's scripts (`python classifier.py`), not pytest, a notebook
    or another program that imports the library; and Ctrl-C is Python's (not ignored, as in a background job)."""
    script = getattr(sys.modules.get("__main__"), "__file__", None)
    project = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    return (script is not None and os.path.abspath(script).startswith(project + os.sep)
            and threading.current_thread() is threading.main_thread()  # where a handler can be set
            and signal.getsignal(signal.SIGINT) is signal.default_int_handler)


sys.excepthook, sys.unraisablehook = _interrupted_while_starting, _interrupt_not_ignored
if _running_a_project_script():
    signal.signal(signal.SIGINT, _stop_at_once)


def out_of_memory(e):
    """The one line for an allocation that failed (torch on the CPU or a GPU, or Python), or None for another
    error. What was saved stays as it was: checkpoints are written whole or not at all (atomic_write)."""
    text = str(e)
    if not isinstance(e, MemoryError) and not re.search(r"can't allocate memory|out of memory", text, re.I):
        return None
    where = "the GPU" if "cuda" in text.lower() else "this machine"
    size = re.search(r"allocate (\d+) bytes", text)
    size = (f"{int(size.group(1)) / 2 ** 30:,.1f} GiB" if size else
            next(iter(re.findall(r"[Tt]ried to allocate ([\d.]+ [KMGT]?i?B)", text)), None))
    what = f"torch could not allocate {size}" if size else "an allocation failed"
    return (f"out of memory: {what} on {where}; the model or a batch is larger than it holds: lower "
            "--batch_size or --max_length, or a size you gave (a width, rank or length flag)")


class Progress:
    """Without a terminal (output to a file, nohup, a batch system) tqdm draws nothing, so a plain line goes
    out instead: after the first `first` seconds, then every `every` seconds (step/total, mean loss,
    tokens/s and the time left). The time left comes from the pace since the previous line, so that a slow
    start (--compile's first steps, a cold cache) stops counting once it is over."""

    def __init__(self, desc, total, every, terminal, first=10.0):
        self.desc, self.total, self.every = desc, total, every
        self.on = bool(every) and not terminal and is_main()
        self.t0 = self.last = time.perf_counter()
        self.wait = min(first, every)
        self.last_steps = 0

    def update(self, steps, tokens=None, mean_loss=None):
        """After `steps` of `total`: a line if it is time for one. `mean_loss` is a function, called only for a
        line (the trainer's gives the loss as last read back from the device, so a line costs no sync)."""
        now = time.perf_counter()
        if not self.on or now - self.last < self.wait:
            return
        self.wait = self.every
        pace = (now - self.last) / max(1, steps - self.last_steps)
        self.last, self.last_steps, elapsed = now, steps, now - self.t0
        eta = pace * (self.total - steps) if self.total else 0.0
        parts = [f"step {steps}/{self.total}"] + ([f"loss {mean_loss():.4f}"] if mean_loss else []) + (
            [f"{tokens / elapsed:.0f} tokens/s"] if tokens is not None else [])
        print(f"{self.desc}: {', '.join(parts)}, "
              f"{_clock(elapsed)} elapsed, about {_clock(eta)} left", flush=True)


def _clock(seconds):
    m, s = divmod(int(seconds), 60)
    return f"{m // 60}h{m % 60:02d}m" if m >= 60 else f"{m}m{s:02d}s"



# ----------------------------------------------------------------------------- ranks and processes

def is_main():
    """Whether this process is rank 0: torchrun's RANK, the rank it joins its group as (utils.distributed); 0
    outside torchrun. Rank 0 alone prints, evaluates and writes."""
    return os.environ.get("RANK", "0") == "0"


def main_print(*args, **kw):
    """print on rank 0 only, so that N processes do not say everything N times."""
    if is_main():
        print(*args, **kw)


def finish_distributed():
    """The end of a torchrun process that completed its work: every rank waits for the others, then the
    group is torn down, and the process exits (status 0) without the interpreter's shutdown. Without the wait
    a rank that finished first (rank 1, while rank 0 still writes the outputs) destroys its end of the
    connections the other still holds, and gloo can abort one of them at exit. Error exits skip the wait
    (torchrun stops the other ranks) and only tear down."""
    # A process that joined a group imported torch.distributed to do it (utils.distributed); one that never
    # imported it (report.py, which has no torch) has no group to end.
    dist = sys.modules.get("torch.distributed")
    if dist is not None and dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
        # Even so, gloo still (rarely) aborts a rank while the interpreter shuts down, after every output is
        # written: "terminate called without an active exception", exit -6, and torchrun reports the run as
        # failed. Every file is closed by now, so the rank leaves without that shutdown.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def process_alive(pid):
    """Whether process `pid` on this machine may still be running (one we may not signal counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
