"""checkpoint.py: checkpoints hold data, not code. A crafted file whose pickle would create a file is refused in
one line by every command that reads checkpoints, and the file is never created; a checkpoint of the earlier
format (the whole args namespace pickled, pathlib paths in it) is read and converted. save_model's file is a
checkpoint with the optimizer's and the random states beside the model's."""
import pathlib
import random
import subprocess
import sys

import numpy as np
import pytest
import torch

import multitask_classifier as mt
from minbert.runs.checkpoint import FORMAT, load_checkpoint, rng_state, save_model, set_rng_state
from minbert.specs import ModelSpec
from tests.checkpoints import multitask_spec
from tests.course import ROOT, part2_args
from tests.processes import cli, run_main
from utils import MinbertError


class _Touch:
    """Unpickling this would run pathlib.Path.touch(marker): code chosen by the file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (pathlib.Path(self.marker),))


class _Open:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def _refused(out):
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and "refused: the file holds Python objects that loading would have to run" in err[0], err


def test_a_crafted_checkpoint_executes_nothing_anywhere(tmp_path, course_data, tiny_model):
    payload, marker = _Touch, tmp_path / "pwned"
    trained = tmp_path / "run"
    mt.main(part2_args(trained, course_data, tiny_model, "--epochs", "1"))
    good = torch.load(trained / "ck" / "mt.pt", weights_only=True)
    evil = trained / "ck" / "evil.pt"
    torch.save({**good, "extra": payload(marker)}, evil)
    # one command as its own process (nothing this test process loaded before can stand in for the refusal), the
    # others in this one
    _refused(cli("multitask_classifier.py", *part2_args(tmp_path / "e", course_data, tiny_model), "--eval_only", str(evil)))
    _refused(run_main("ensemble.py", str(evil), str(trained / "ck" / "mt.pt"), "--data_dir", str(course_data),
                      "--run_dir", str(tmp_path / "ens"), "--out", str(tmp_path / "ens-out")))
    # report.py reads the log named after a checkpoint, never the checkpoint itself
    out = run_main("report.py", str(evil), "--out", str(tmp_path / "report"))
    assert out.returncode == 2 and out.stderr.strip().endswith("evil.pt: no log beside this checkpoint "
                                                               "(evil-log.jsonl)"), out.stderr
    # --resume reads the run's '-last' checkpoint
    last = trained / "ck" / "mt-last.pt"
    torch.save({**torch.load(last, weights_only=True), "extra": payload(marker)}, last)
    _refused(run_main("multitask_classifier.py", *part2_args(trained, course_data, tiny_model, "--epochs", "2"),
                      "--resume"))
    assert not marker.exists()


def test_any_code_in_a_pickle_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    for payload in (_Touch, _Open):
        path = tmp_path / f"{payload.__name__}.pt"
        torch.save({"format": "minbert-checkpoint", "version": 2, "x": payload(marker)}, path)
        with pytest.raises(MinbertError, match="refused: the file holds Python objects that loading would have to run"):
            load_checkpoint(path)
    assert not marker.exists()


def test_a_plain_pickle_is_one_line_without_torchs_protocol_warning(tmp_path, course_data):
    """pickle.dumps' own protocol (not torch.save's zip): torch's loader warns about the protocol in several lines,
    then fails; the user sees one line, and nothing in the file runs."""
    import pickle
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pt"
    evil.write_bytes(pickle.dumps(_Touch(marker)))
    evil.with_name("also.pt").write_bytes(evil.read_bytes())
    out = run_main("ensemble.py", str(evil), str(evil.with_name("also.pt")), "--data_dir", str(course_data),
                   "--run_dir", str(tmp_path / "ens"), "--out", str(tmp_path / "ens-out"))
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and "evil.pt: cannot read checkpoint (damaged, or not a file torch.save wrote" in err[0], err
    assert not marker.exists()


def test_damaged_and_foreign_files_are_one_line(tmp_path):
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(MinbertError, match=r"junk.pt: cannot read checkpoint \(not a file torch.save wrote: it begins "
                                           r"b'not a ch'\)"):
        load_checkpoint(junk)
    junk.write_bytes(b"PK\x03\x04 a damaged zip")
    with pytest.raises(MinbertError, match=r"junk.pt: cannot read checkpoint \(cut short or damaged: "):
        load_checkpoint(junk)
    weights = tmp_path / "weights.pt"
    torch.save({"w": torch.zeros(2)}, weights)
    with pytest.raises(MinbertError, match="not a minbert checkpoint"):
        load_checkpoint(weights)
    with pytest.raises(MinbertError, match="checkpoint not found"):
        load_checkpoint(tmp_path / "absent.pt")
    whole = tmp_path / "whole.pt"  # a checkpoint cut short (a copy stopped part way): said so
    torch.save({"w": torch.zeros(1000)}, whole)
    (tmp_path / "cut.pt").write_bytes(whole.read_bytes()[:2000])
    with pytest.raises(MinbertError, match=r"cut.pt: cannot read checkpoint \(cut short or damaged: the zip torch.save "
                                           r"writes ends with its directory, which is missing"):
        load_checkpoint(tmp_path / "cut.pt")
    import os
    os.mkfifo(tmp_path / "pipe.pt")  # there, so "not found" would mislead (and reading it would block)
    with pytest.raises(MinbertError, match=r"pipe.pt: is a named pipe, not a checkpoint file$"):
        load_checkpoint(tmp_path / "pipe.pt")


def test_an_earlier_format_checkpoint_is_converted(tmp_path, course_data, tiny_model, capsys):
    """What the earlier code wrote: {'model', 'args': vars(args) with a pathlib path, 'epoch', 'scores'}."""
    trained = tmp_path / "run"
    scores = mt.main(part2_args(trained, course_data, tiny_model, "--epochs", "1", "--pooling", "cls"))
    new = torch.load(trained / "ck" / "mt.pt", weights_only=True)
    old = trained / "ck" / "old.pt"
    torch.save({"model": new["model"], "epoch": 0, "scores": scores,
                "args": {"pretrained": str(tiny_model), "pair_encoding": "cross", "pooling": "cls",
                         "fine_tune_mode": "full-model", "task_dropout": None, "hidden_dropout_prob": 0.1,
                         "max_length": 128, "run_dir": pathlib.Path(trained), "explicit": {"pretrained"},
                         "lora_rank": 8, "lora_alpha": 16.0, "lora_targets": ["query", "value"], "pals": False,
                         "pals_dim": None, "siamese_proj": 0}}, old)
    state = load_checkpoint(old)
    assert state["pipeline"] == "multitask" and ModelSpec.from_dict(state["spec"]).pooling == "cls"
    rescored = mt.main(part2_args(tmp_path / "e", course_data, tiny_model) + ["--eval_only", str(old)])
    assert rescored == pytest.approx(scores)
    converted = tmp_path / "new.pt"
    out = run_main("tools/convert_checkpoint.py", "--convert", str(old), str(converted))
    assert out.returncode == 0 and load_checkpoint(converted)["spec"] == state["spec"]


# ----------------------------------------------------------------------------- writing survives Ctrl-C and a full disk

class _System:
    """os.system(...): torch 2.13 refuses it as 'unsupported GLOBAL posix.system whose module posix is blocked'."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os
        return (os.system, (f"touch {self.marker}",))


def test_every_refusal_wording_of_torch_is_one_line_naming_what_the_file_holds(tmp_path, course_data, tiny_model):
    """A crafted checkpoint, and crafted weights in a --pretrained folder: refused as holding Python objects (not
    as 'damaged'), and torch's advice to retry with weights_only=False never reaches the user."""
    marker = tmp_path / "pwned"
    evil = tmp_path / "evil.pt"
    torch.save({"format": "minbert-checkpoint", "version": 2, "x": _System(marker)}, evil)
    with pytest.raises(MinbertError, match=r"refused: the file holds Python objects .*\(posix.system\)"):
        load_checkpoint(evil)
    folder = tmp_path / "weights"
    folder.mkdir()
    for name in ("config.json", "vocab.txt"):
        (folder / name).write_bytes((tiny_model / name).read_bytes())
    torch.save({"bert.embeddings.word_embeddings.weight": _System(marker)}, folder / "pytorch_model.bin")
    out = run_main("multitask_classifier.py", "--pretrained", str(folder), "--data_dir", str(course_data),
                   "--run_dir", str(tmp_path / "r"), cwd=tmp_path)
    _refused(out)
    assert "posix.system" in out.stderr and "weights_only" not in out.stderr
    assert not marker.exists()


def test_ctrl_c_while_a_checkpoint_is_written_completes_it_then_says_one_line(tmp_path, course_data, tiny_model,
                                                                           monkeypatch, capsys):
    """The interrupt lands inside torch.save: the write finishes (no torch 'unexpected pos' traceback, no .tmp
    left), the epoch's log line is written, and the one line names the epoch just saved."""
    import os
    import signal
    from minbert.runs import checkpoint
    from utils import main_guard
    real, calls = torch.save, []

    def interrupted_save(obj, fp, *a, **kw):
        calls.append(1)
        if len(calls) == 2:  # the '-last' checkpoint of epoch 0
            os.kill(os.getpid(), signal.SIGINT)
        return real(obj, fp, *a, **kw)
    monkeypatch.setattr(checkpoint.torch, "save", interrupted_save)
    args = part2_args(tmp_path, course_data, tiny_model, "--epochs", "2", "--steps_per_epoch", "2")
    with pytest.raises(SystemExit) as exit_:
        main_guard(lambda: mt.main(args))
    assert exit_.value.code == 130
    err = [l for l in capsys.readouterr().err.splitlines() if l.strip()]
    assert err == [f"interrupted: mt epoch 0 is saved in {tmp_path / 'ck' / 'mt-last.pt'}; the same command plus "
                   "--resume continues from there"], err  # the command names its folder already
    assert load_checkpoint(tmp_path / "ck" / "mt-last.pt")["epoch"] == 0
    assert not list((tmp_path / "ck").glob("*.tmp"))
    assert len((tmp_path / "ck" / "mt-log.jsonl").read_text().splitlines()) == 1
    monkeypatch.setattr(checkpoint.torch, "save", real)
    mt.main(args + ["--resume"])  # and the run continues from it


_LIMITED = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit then fails with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, ({limit}, {limit}))
sys.argv = sys.argv[1:]
sys.path.insert(0, {root!r})
import runpy
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_a_checkpoint_write_that_fails_is_one_line_and_leaves_nothing(tmp_path, course_data, tiny_model):
    """A real failed write (the process's file-size limit, which fails a write the way a full disk does): one line
    naming the file, no partial '.tmp' left, the folder as it was before the write."""
    args = part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "2")
    limit = 64 * 1024  # above every log and prediction file, below the tiny model's checkpoint
    out = subprocess.run([sys.executable, "-c", _LIMITED.format(limit=limit, root=str(ROOT)),
                          str(ROOT / "multitask_classifier.py"), *args], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and "mt.pt: cannot write it: the file would exceed the size limit" in err[0], err
    assert not list((tmp_path / "ck").glob("*.tmp")) and not (tmp_path / "ck" / "mt.pt").exists()
    # The advice is the command that continues the run (the folder now holds the run's lock and events, so the
    # plain same command would be refused there); followed with room to write, it completes the run.
    advice = err[0].split("make room and then run the same command plus ")[1].split()
    assert advice[0] == "--resume", err[0]
    done = run_main("multitask_classifier.py", *args, *advice, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert (tmp_path / "ck" / "mt.pt").exists() and (tmp_path / "pred" / "sst-dev-output.csv").exists()


def test_adapter_state_into_a_plain_model_names_the_mode(tiny_model):
    from minbert.runs.checkpoint import load_trainable_state, trainable_state
    lora = mt.MultitaskBERT(multitask_spec(tiny_model, "lora"))
    plain = mt.MultitaskBERT(multitask_spec(tiny_model, "full-model"))
    with pytest.raises(MinbertError, match="holds LoRA/DoRA adapters and this model has none"):
        load_trainable_state(plain, trainable_state(lora), "ck.pt")
    with pytest.raises(MinbertError, match="this model has adapters and the checkpoint none"):
        load_trainable_state(lora, trainable_state(plain), "ck.pt")


def test_interrupted_checkpoint_write_keeps_the_previous_file(tmp_path, monkeypatch):
    from minbert.runs.checkpoint import FORMAT, VERSION, load_checkpoint, save_checkpoint
    path = tmp_path / "x.pt"
    first = {"format": FORMAT, "version": VERSION, "epoch": 1}
    save_checkpoint(path, first)

    def broken_save(obj, fp):
        fp.write(b"half a checkpoint")
        raise KeyboardInterrupt
    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(KeyboardInterrupt):
        save_checkpoint(path, {**first, "epoch": 2})
    monkeypatch.undo()
    assert load_checkpoint(path) == first


# ----------------------------------------------------------------------------- every random state a run draws from

def test_the_random_state_round_trips_every_generator_a_run_uses(monkeypatch):
    """Python, NumPy and torch's CPU generator on this machine; each CUDA device's generator, through torch.cuda's
    own calls (stood in for here; test_the_cuda_generators_round_trip runs them on a GPU)."""
    state = rng_state()
    draws = (random.random(), np.random.rand(), torch.rand(3))
    set_rng_state(state)
    assert (random.random(), np.random.rand()) == draws[:2] and torch.equal(torch.rand(3), draws[2])
    generators, restored = [torch.tensor([1], dtype=torch.uint8), torch.tensor([2], dtype=torch.uint8)], {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: generators)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda g, device: restored.__setitem__(device, g))
    saved = rng_state()
    assert saved["cuda"] == generators
    set_rng_state(saved)
    assert restored == {0: generators[0], 1: generators[1]}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    restored.clear()
    set_rng_state(saved)  # a GPU run resumed on the CPU: its CPU generator is restored, the CUDA ones skipped
    assert restored == {}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
def test_the_cuda_generators_round_trip():
    torch.cuda.manual_seed_all(3)
    torch.rand(1, device="cuda")
    state = rng_state()
    first = torch.rand(8, device="cuda")
    set_rng_state(state)
    assert torch.equal(torch.rand(8, device="cuda"), first)


def test_save_model_writes_a_checkpoint_the_loader_reads_with_the_optimizer_and_random_states(tmp_path, tiny_model):
    model = mt.MultitaskBERT(multitask_spec(tiny_model, "lora"))
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1, momentum=0.9)
    model.predict_sentiment(torch.tensor([[2, 7, 3]]), torch.ones(1, 3, dtype=torch.long)).sum().backward()
    optimizer.step()
    path = save_model(tmp_path / "m.pt", model, optimizer, by="a test")
    state = load_checkpoint(path)
    assert (state["format"], state["pipeline"], state["run"]) == (FORMAT, "multitask", "a test")
    assert state["model_name"] == "m"
    assert ModelSpec.from_dict(state["spec"]) == model.spec
    trained = {n: p for n, p in model.named_parameters() if p.requires_grad}
    assert state["model"].keys() == trained.keys() and any(".lora_" in n for n in trained)  # the frozen BERT is not
    assert all(torch.equal(state["model"][n], p) for n, p in trained.items())
    saved, now = state["optimizer"], optimizer.state_dict()
    assert saved["param_groups"] == now["param_groups"] and saved["state"].keys() == now["state"].keys()
    assert all(torch.equal(saved["state"][k]["momentum_buffer"], v["momentum_buffer"]) for k, v in now["state"].items())
    assert state["rng"]["torch"].equal(torch.get_rng_state())
    assert "optimizer" not in load_checkpoint(save_model(tmp_path / "plain.pt", model))
