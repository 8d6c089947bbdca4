"""utils.py and the scripts' entry guard in a process: a bad flag, Ctrl-C and running out of memory are one line each;
a closed pipe stops no run; torch.compile of the model keeps its outputs; ranks and devices. (The guard's own cases:
tests/minbert/test_cli.py.)"""
import re
import resource
import subprocess
import sys

import pytest
import torch

import classifier
import multitask_classifier as mt
import utils
from minbert.specs import ModelSpec
from tests.course import ROOT, part1_args, part2_args
from tests.processes import interrupt_second_epoch, one_line_error, run_main
from utils import main_guard, maybe_compile


@pytest.mark.parametrize("script, argv, match", [
    ("prepare_submit.py", ["--part", "3"], r"prepare_submit.py: argument --part: invalid choice: '3'"),
    ("evaluation.py", ["--score"], r"evaluation.py: argument --score: expected 2 arguments"),
    ("datasets.py", ["--bogus"], r"datasets.py: unrecognized arguments: --bogus"),
    ("sanity_check.py", ["--bogus"], r"sanity_check.py: unrecognized arguments: --bogus"),
])
def test_every_scripts_bad_flag_is_one_line(tmp_path, script, argv, match):
    one_line_error(run_main(script, *argv, cwd=tmp_path), match)


@pytest.mark.parametrize("script", ["classifier.py", "multitask_classifier.py"])
def test_bad_flags_on_the_command_line_are_one_line(tmp_path, script):
    one_line_error(run_main(script, "--batch_size", "0", cwd=tmp_path), r"--batch_size: 0 must be an integer >= 1")
    one_line_error(run_main(script, "--steps_per_epoch" if script.startswith("multi") else "--epochs", "0",
                         cwd=tmp_path), r"0 must be an integer (>= 1|from 1 to 10,000(,000)?)")


def test_ctrl_c_is_one_line_naming_the_checkpoint_and_how_to_resume(tmp_path, course_data, tiny_model, monkeypatch,
                                                                     capsys):
    interrupt_second_epoch(monkeypatch)
    args = part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst", "--fine-tune-mode", "full-model")
    with pytest.raises(SystemExit) as e:
        main_guard(lambda: classifier.main(args))
    assert e.value.code == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert f"sst epoch 0 is saved in {tmp_path / 'ck' / 'full-model-sst-last.pt'}" in err[0]
    assert "the same command plus --resume continues from there" in err[0]  # it names its folder already


def test_a_reader_that_stops_reading_stops_nothing(tmp_path, course_data, tiny_model):
    """`python classifier.py ... | head -1`: the pipe closes after the first line; the run still trains, writes and
    publishes every file and exits 0, with no traceback (the process, and its pipe, are what is tested)."""
    args = part1_args(tmp_path, course_data, tiny_model, "--datasets", "sst")
    proc = subprocess.Popen([sys.executable, str(ROOT / "classifier.py"), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    first = proc.stdout.readline()
    proc.stdout.close()  # what head does after its lines
    assert proc.wait(timeout=600) == 0 and first.startswith("precision:")
    assert (tmp_path / "pred" / "last-linear-layer-sst-test-out.csv").is_file()
    assert len((tmp_path / "ck" / "last-linear-layer-sst-log.jsonl").read_text().splitlines()) == 2


def test_a_model_larger_than_memory_is_one_line(tmp_path, course_data, tiny_model):
    """A size flag far beyond the machine (a 10^12-unit shared head: terabytes) is refused by the allocator; the
    user sees one line saying so, not torch's traceback. The process runs under an 8 GiB address-space limit, so
    the refusal is the kernel's answer whatever its overcommit setting (no OOM killer, no swapping)."""
    def limit_memory():
        resource.setrlimit(resource.RLIMIT_AS, (8 << 30, 8 << 30))
    out = subprocess.run([sys.executable, str(ROOT / "multitask_classifier.py"),
                          *part2_args(tmp_path, course_data, tiny_model, "--shared_head", str(10 ** 12))],
                         capture_output=True, text=True, timeout=600, preexec_fn=limit_memory)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and re.match(r"error: out of memory: torch could not allocate [\d,.]+ GiB on this machine; "
                                      r".*lower --batch_size", err[0]), err


def test_compiled_model_matches_eager(tiny_model):
    """--compile: torch.compile of the BERT forward (dynamic shapes) gives the eager outputs."""
    cfg = ModelSpec(pipeline="classifier", pretrained=str(tiny_model), dropout=[0.0])
    model = classifier.BertSentimentClassifier(cfg).eval()
    ids = torch.tensor([[2, 7, 9, 11, 3, 0], [2, 12, 13, 14, 15, 3]])
    assert_compiles_to_eager(model, ids, (ids != 0).long())


def assert_compiles_to_eager(model, ids, mask):
    """maybe_compile(model): its outputs are eager's (and at a new length too), the backbone's forward one
    compiled graph without a break back to Python."""
    torch._dynamo.reset()
    counters = torch._dynamo.utils.counters
    counters.clear()
    with torch.no_grad():
        eager = model(ids, mask)
        maybe_compile(model, True)
        compiled = model(ids, mask)
        longer = model(torch.cat([ids, ids[:, :2]], 1), torch.cat([mask, mask[:, :2]], 1))  # a new length
    torch.testing.assert_close(compiled, eager, atol=1e-5, rtol=1e-4)
    assert longer.shape == (2, 5)
    assert counters["stats"]["unique_graphs"] >= 1  # the forward ran as a compiled graph, not eagerly
    assert not counters["graph_break"]  # the whole forward, without falling back to Python midway


def test_compile_flag_reaches_the_models_forward(tmp_path, course_data, tiny_model, monkeypatch, capsys):
    """classifier.py and multitask_classifier.py --compile hand BERT's forward to torch.compile, shapes dynamic, and
    the start line says the compiling comes first (minutes on a CPU, with nothing else printed meanwhile)."""
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: compiled.append(kw) or fn)
    classifier.main(part1_args(tmp_path / "p1", course_data, tiny_model, "--epochs", "1", "--datasets", "sst",
                               "--fine-tune-mode", "full-model", "--compile"))
    assert compiled == [{"dynamic": True}]
    assert ("training step: eager (recording the step as CUDA graphs needs a CUDA GPU; cpu runs it as it comes), with "
            "--compile: torch.compile (Inductor) compiles the model first, which takes minutes on a CPU before the "
            "first step") in capsys.readouterr().out
    mt.main(part2_args(tmp_path / "p2", course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "2", "--compile"))
    assert compiled == [{"dynamic": True}] * 2


def test_processes_beyond_the_nodes_gpus_stay_off_them_and_use_gpu_says_how_many(monkeypatch):
    """torchrun --nproc_per_node 2 on a node with one GPU: a CPU run's second process never selects a GPU that is
    not there (it did, and died on 'invalid device ordinal'); with --use_gpu the process count is one line."""
    import torch.distributed as dist
    selected = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "set_device", selected.append)
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda *a, **kw: None)
    monkeypatch.setattr(dist, "get_rank", lambda: int(utils.os.environ["RANK"]))
    monkeypatch.setattr(utils.atexit, "register", lambda f: None)
    monkeypatch.setenv("WORLD_SIZE", "2")
    for local in (0, 1):
        monkeypatch.setenv("RANK", str(local))
        monkeypatch.setenv("LOCAL_RANK", str(local))
        assert utils.distributed() == (local, 2)
    assert selected == [0]
    assert utils.get_device(False) == torch.device("cpu")
    with pytest.raises(utils.MinbertError, match=r"process 1 on its node, which has 1 GPU\(s\).*--nproc_per_node 1"):
        utils.get_device(True)
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert utils.get_device(True) == torch.device("cuda", 0)


def test_a_gpt2_model_compiles_to_its_eager_outputs(tiny_gpt2):
    """--compile on GPT-2: the backbone the model names (gpt, not bert) compiles in one graph, its outputs eager's."""
    from gpt2.sentiment import GPT2SentimentClassifier
    model = GPT2SentimentClassifier(ModelSpec(pipeline="gpt2-classifier", pretrained=str(tiny_gpt2), dropout=[0.0],
                                              fine_tune_mode="full-model")).eval()
    ids = torch.tensor([[5, 7, 9, 11, 3, 0], [2, 12, 13, 14, 15, 3]])
    assert_compiles_to_eager(model, ids, torch.tensor([[1, 1, 1, 1, 1, 0], [1] * 6]))


def test_compile_flag_reaches_each_gpt2_scripts_model(tmp_path, course_data, tiny_gpt2, monkeypatch):
    """gpt2/classifier.py, paraphrase_detection.py and sonnet_generation.py --compile hand GPT-2's forward to
    torch.compile (the sonnets' training and perplexity run through it)."""
    from gpt2 import classifier as gpt2_classifier, paraphrase_detection, sonnet_generation
    from tests.gpt2.test_sonnet_pipeline import sonnet_argv, sonnet_files
    from tests.checkpoints import make_gpt2_checkpoint
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda fn, **kw: compiled.append((fn.__qualname__, kw)) or fn)
    common = ["--pretrained", str(tiny_gpt2), "--data_dir", str(course_data), "--epochs", "1", "--compile",
              "--predictions_dir", str(tmp_path / "pred")]
    gpt2_classifier.main(common + ["--datasets", "sst", "--fine-tune-mode", "full-model", "--run_dir", str(tmp_path / "c")])
    paraphrase_detection.main(common + ["--run_dir", str(tmp_path / "p")])
    model = make_gpt2_checkpoint(tmp_path / "m", n_positions=512)
    sonnet_generation.main(sonnet_argv(tmp_path / "s", model, sonnet_files(tmp_path / "data"), "--compile"))
    assert compiled == [("GPT2Model.forward", {"dynamic": True})] * 3
