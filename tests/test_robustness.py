"""What a new user on another machine runs into: the precision picked from the hardware, runs that never
overwrite each other, and bad flags or files that get one clear line before anything is lost."""
import json
import re
import subprocess
import sys

import pytest
import torch

import classifier
import multitask_classifier as mt
import precision
from conftest import ROOT, interrupt_second_epoch, part1_args as _part1, part2_args as _part2
from utils import MinbertError, main_guard, set_interrupt_hint

CPU = torch.device("cpu")


# ----------------------------------------------------------------------------- --amp auto

@pytest.mark.parametrize("capability, flags, expected", [
    ("AVX2", set(), "none"),                      # AMD EPYC / older Intel: bf16 would be emulated
    ("AVX512", {"avx512f"}, "none"),              # AVX-512 without its BF16 extension
    ("AVX512", {"avx512f", "avx512_bf16"}, "bf16"),
    ("AMX", {"amx_bf16", "amx_tile"}, "bf16"),
])
def test_auto_picks_bf16_only_where_the_cpu_runs_it_natively(monkeypatch, capability, flags, expected):
    monkeypatch.setattr(precision, "cpu_capability", lambda: capability)
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset(flags))
    amp, why = precision.resolve_amp("auto", CPU)
    assert amp == expected and why.startswith("fp32 (auto" if expected == "none" else "bf16 (auto")
    assert capability in why


def test_explicit_bf16_without_native_support_runs_but_warns_in_one_line(monkeypatch):
    monkeypatch.setattr(precision, "cpu_capability", lambda: "AVX2")
    monkeypatch.setattr(precision, "cpu_flags", lambda: frozenset())
    lines = []
    from types import SimpleNamespace
    args = SimpleNamespace(amp="bf16")
    assert precision.setup_precision(args, CPU, log=lines.append) == "bf16"
    assert len(lines) == 1 and "warning" in lines[0] and "much slower than fp32" in lines[0]
    args = SimpleNamespace(amp="fp16")
    precision.setup_precision(args, CPU, log=lines.append)
    assert "warning" in lines[1] and "fp16" in lines[1]
    args = SimpleNamespace(amp="none")
    precision.setup_precision(args, CPU, log=lines.append)
    assert lines[2] == "precision: fp32 (--amp none)"


def test_auto_is_every_scripts_default_and_says_what_it_picked(tmp_path, course_data, tiny_model, capsys):
    classifier.main(_part1(tmp_path, course_data, tiny_model, "--epochs", "1", "--datasets", "sst"))
    out = capsys.readouterr().out
    expected = precision.resolve_amp("auto", CPU)[1]
    assert f"precision: {expected}" in out and "(auto:" in out


# ----------------------------------------------------------------------------- runs never overwrite runs

def _part1_default_paths(data, model, *extra):
    return ["--pretrained", str(model), "--data_dir", str(data), "--epochs", "1", "--batch_size", "8",
            "--datasets", "sst", "--fine-tune-mode", "full-model", *extra]


def test_a_second_run_keeps_the_first_runs_files(tmp_path, course_data, tiny_model, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    classifier.main(_part1_default_paths(course_data, tiny_model, "--run_name", "first", "--lr", "1e-3"))
    first = {p.name: p.read_bytes() for p in (tmp_path / "runs" / "first").iterdir() if p.is_file()}
    assert {"full-model-sst.pt", "full-model-sst-dev-out.csv", "full-model-sst-log.jsonl"} <= set(first)
    published = (tmp_path / "predictions" / "full-model-sst-dev-out.csv").read_bytes()
    assert published == first["full-model-sst-dev-out.csv"]
    capsys.readouterr()
    classifier.main(_part1_default_paths(course_data, tiny_model, "--lr", "3e-2", "--seed", "5"))  # a default name
    out = capsys.readouterr().out
    second = [d for d in (tmp_path / "runs").iterdir() if d.name != "first"]
    assert len(second) == 1 and second[0].name.startswith("classifier-")
    assert {p.name: p.read_bytes() for p in (tmp_path / "runs" / "first").iterdir() if p.is_file()} == first  # untouched
    assert (tmp_path / "predictions" / "full-model-sst-dev-out.csv").read_bytes() == \
        (second[0] / "full-model-sst-dev-out.csv").read_bytes()
    if (second[0] / "full-model-sst-dev-out.csv").read_bytes() != published:
        assert "replacing those of run first (still in runs/first)" in out
    sources = json.loads((tmp_path / "predictions" / ".sources.json").read_text())
    assert sources["full-model-sst-dev-out.csv"]["run"] == second[0].name
    # the same run name again is refused, in one line, before anything is written
    with pytest.raises(MinbertError, match=r"--run_name runs/first: already holds a run"):
        classifier.main(_part1_default_paths(course_data, tiny_model, "--run_name", "first"))
    assert {p.name: p.read_bytes() for p in (tmp_path / "runs" / "first").iterdir() if p.is_file()} == first


def test_multitask_runs_get_their_own_folders(tmp_path, course_data, tiny_model, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    common = ["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--epochs", "1", "--batch_size", "8",
              "--fine-tune-mode", "full-model"]
    mt.main(common + ["--run_name", "a", "--lr", "1e-3"])
    a_files = {p.name: p.read_bytes() for p in (tmp_path / "runs" / "a").iterdir() if p.is_file()}
    assert {"multitask.pt", "multitask-log.jsonl", "sst-dev-output.csv", "para-test-output.csv"} <= set(a_files)
    mt.main(common + ["--run_name", "b", "--lr", "5e-2", "--seed", "3"])
    out = capsys.readouterr().out
    assert {p.name: p.read_bytes() for p in (tmp_path / "runs" / "a").iterdir() if p.is_file()} == a_files
    for name in ("sst-dev-output.csv", "sts-test-output.csv"):
        assert (tmp_path / "predictions" / name).read_bytes() == (tmp_path / "runs" / "b" / name).read_bytes()
    assert "replacing those of run a (still in runs/a)" in out
    rows = (tmp_path / "predictions" / "multitask-results.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows] == ["run", "a", "b"]  # the results table only grows


def test_resume_without_a_name_takes_the_newest_run(tmp_path, course_data, tiny_model, monkeypatch, capsys):
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path / "empty")
    with pytest.raises(MinbertError, match="--resume: no classifier run to resume in runs/"):
        classifier.main(_part1_default_paths(course_data, tiny_model, "--resume"))
    monkeypatch.chdir(tmp_path)
    restore = interrupt_second_epoch(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        classifier.main(_part1_default_paths(course_data, tiny_model, "--run_name", "r1", "--epochs", "2"))
    restore()
    capsys.readouterr()
    classifier.main(_part1_default_paths(course_data, tiny_model, "--resume", "--epochs", "2"))
    assert "resumed full-model-sst from runs/r1/full-model-sst-last.pt after epoch 0" in capsys.readouterr().out


# ----------------------------------------------------------------------------- bad flags: one line each

@pytest.mark.parametrize("flag, value, match", [
    ("--epochs", "0", r"argument --epochs: 0 must be an integer >= 1"),
    ("--epochs", "-1", r"argument --epochs: -1 must be an integer >= 1"),
    ("--batch_size", "0", r"argument --batch_size: 0 must be an integer >= 1"),
    ("--lr", "-1", r"argument --lr: -1 must be a number > 0"),
    ("--lr", "abc", r"argument --lr: 'abc' is not a number"),
    ("--hidden_dropout_prob", "1.5", r"argument --hidden_dropout_prob: 1.5 must be a probability in \[0, 1\)"),
    ("--grad_accum", "0", r"argument --grad_accum: 0 must be an integer >= 1"),
    ("--max_length", "0", r"argument --max_length: 0 must be an integer >= 1"),
    ("--weight_decay", "-0.1", r"argument --weight_decay: -0.1 must be a number >= 0"),
    # NumPy's legacy seeding takes 0 .. 2**32 - 1: outside, a traceback mid-start
    ("--seed", "-1", r"argument --seed: -1 must be an integer from 0 to 4294967295"),
    ("--seed", "99999999999", r"argument --seed: 99999999999 must be an integer from 0 to 4294967295"),
    # infinity passes "> 0" but is no learning rate, weight or norm anyone means
    ("--lr", "inf", r"argument --lr: inf must be a number > 0"),
    ("--max_grad_norm", "inf", r"argument --max_grad_norm: inf must be a number >= 0"),
    ("--rdrop_weight", "inf", r"argument --rdrop_weight: inf must be a number >= 0"),
])
@pytest.mark.parametrize("script", [classifier, mt])
def test_numeric_flags_are_checked_at_parse_time(script, flag, value, match):
    with pytest.raises(MinbertError, match=match):
        script.get_args(["--pretrained", "all-minilm-l6-v2", flag, value])


def test_the_largest_seed_runs(tmp_path, course_data, tiny_model):
    mt.main(_part2(tmp_path, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "1", "--seed", str(2 ** 32 - 1)))


IDLE = "as given it would change nothing, so it is refused rather than ignored"


@pytest.mark.parametrize("script, argv, match", [
    (mt, ["--lora_rank", "4"], "--lora_rank sets the adapters, which only --fine-tune-mode lora or dora adds"),
    (classifier, ["--lora_alpha", "8", "--fine-tune-mode", "full-model"], "--lora_alpha sets the adapters"),
    (mt, ["--llrd", "0.8", "--fine-tune-mode", "last-linear-layer"], "--llrd scales the learning rates of BERT's layers"),
    (classifier, ["--llrd", "0.8"], "--llrd scales the learning rates of BERT's layers"),
    (mt, ["--smart_step", "0.1"], "--smart_step shapes SMART's adversarial term, which is off"),
    (mt, ["--smart_weight", "1", "--smart_eps", "1e-3"], "--smart_eps is the radius of --smart_projection ball"),
    (mt, ["--smart_momentum", "0.9"], "--smart_momentum is the momentum of SMART's Bregman teacher"),
    (mt, ["--pals_dim", "8"], "--pals_dim is the width of the PALs, which only --pals adds"),
    (mt, ["--mnrl_scale", "10", "--pair_encoding", "siamese"], "--mnrl_scale scales the MNRL loss, which is off"),
    (mt, ["--sequential", "--sampler", "proportional"], "--sampler picks each step's task, which --sequential does not"),
    (mt, ["--task_dropout", "0.1", "0.1", "0.1", "--hidden_dropout_prob", "0.3"], "--hidden_dropout_prob is every head's"),
    (classifier, ["--compile"], "--compile compiles BERT's forward, which --fine-tune-mode last-linear-layer runs once"),
])
def test_a_flag_the_configuration_ignores_is_one_line(script, argv, match):
    with pytest.raises(MinbertError, match=re.escape(match) + ".*" + IDLE):
        script.get_args(["--pretrained", "all-minilm-l6-v2", *argv])


@pytest.mark.parametrize("script, argv", [
    (mt, ["--lora_rank", "4", "--fine-tune-mode", "lora"]), (mt, ["--llrd", "0.8", "--fine-tune-mode", "dora"]),
    (mt, ["--smart_weight", "1", "--smart_step", "0.1", "--smart_projection", "ball", "--smart_eps", "1e-3"]),
    (mt, ["--smart_bregman_weight", "1", "--smart_momentum", "0.9"]), (mt, ["--pals", "--pals_dim", "8"]),
    (mt, ["--task_dropout", "0.1", "0.2", "0.3"]), (classifier, ["--compile", "--fine-tune-mode", "full-model"]),
    (classifier, ["--recipe", "handout"]), (mt, ["--recipe", "handout"]),
])
def test_the_same_flags_where_they_act_are_taken(script, argv):
    script.get_args(["--pretrained", "all-minilm-l6-v2", *argv])


def test_a_dataset_given_twice_is_refused():
    with pytest.raises(MinbertError, match="--datasets sst sst: sst given twice"):
        classifier.get_args(["--datasets", "sst", "sst"])


def test_eval_only_names_the_training_flags_it_ignores(tmp_path, course_data, tiny_model, capsys):
    args = _part2(tmp_path, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "1")
    mt.main(args)
    capsys.readouterr()
    mt.main(args + ["--eval_only", str(tmp_path / "ck" / "mt.pt")])
    line = [l for l in capsys.readouterr().out.splitlines() if l.startswith("--eval_only re-scores")]
    assert len(line) == 1 and "--lr" in line[0] and "--epochs" in line[0] and "--pretrained" not in line[0]


def test_ensemble_takes_only_the_speed_flags_inference_uses():
    import ensemble
    with pytest.raises(MinbertError, match="unrecognized arguments: --grad_accum"):
        ensemble.build_parser().parse_args(["a.pt", "--grad_accum", "2"])
    assert ensemble.build_parser().parse_args(["a.pt", "--amp", "none", "--attn", "explicit"]).amp == "none"


@pytest.mark.parametrize("script, argv, match", [
    ("prepare_submit.py", ["--part", "3"], r"prepare_submit.py: argument --part: invalid choice: '3'"),
    ("evaluation.py", ["--score"], r"evaluation.py: argument --score: expected 2 arguments"),
    ("datasets.py", ["--bogus"], r"datasets.py: unrecognized arguments: --bogus"),
    ("sanity_check.py", ["--bogus"], r"sanity_check.py: unrecognized arguments: --bogus"),
])
def test_every_scripts_bad_flag_is_one_line(tmp_path, script, argv, match):
    _one_line_error(_cli(script, *argv, cwd=tmp_path), match)


def _cli(script, *args, cwd=ROOT):
    return subprocess.run([sys.executable, str(ROOT / script), *args], cwd=cwd, capture_output=True, text=True)


def _one_line_error(out, pattern):
    assert out.returncode == 2, out.stderr[-2000:]
    assert "Traceback" not in out.stderr
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and re.search(pattern, err[0]), out.stderr


@pytest.mark.parametrize("script", ["classifier.py", "multitask_classifier.py"])
def test_bad_flags_on_the_command_line_are_one_line(tmp_path, script):
    _one_line_error(_cli(script, "--batch_size", "0", cwd=tmp_path), r"--batch_size: 0 must be an integer >= 1")
    _one_line_error(_cli(script, "--steps_per_epoch" if script.startswith("multi") else "--epochs", "0",
                         cwd=tmp_path), r"must be an integer >= 1")


def test_max_length_beyond_the_position_embeddings_is_refused_at_start(tmp_path, course_data, tiny_model):
    for script in ("classifier.py", "multitask_classifier.py"):
        out = _cli(script, "--pretrained", str(tiny_model), "--data_dir", str(course_data), "--max_length", "600",
                   cwd=tmp_path)
        _one_line_error(out, r"--max_length 600: .*tiny-bert has 512 position embeddings, so at most --max_length 512")
        assert not (tmp_path / "runs").exists()  # refused before anything was made


def test_non_utf8_csv_names_file_and_line(tmp_path, course_data, tiny_model):
    p = course_data / "ids-sst-train.csv"
    lines = p.read_bytes().split(b"\n")
    lines[4] = lines[4].replace(b"the", b"caf\xe9", 1) if b"the" in lines[4] else lines[4] + b"\xe9"
    p.write_bytes(b"\n".join(lines))
    out = _cli("classifier.py", *_part1(tmp_path, course_data, tiny_model, "--datasets", "sst"), cwd=tmp_path)
    _one_line_error(out, r"ids-sst-train.csv: line 5: byte 0xE9 is not UTF-8")


def test_an_output_folder_that_is_a_file_fails_before_training(tmp_path, course_data, tiny_model):
    (tmp_path / "pred").write_text("I am a file")
    out = _cli("classifier.py", *_part1(tmp_path, course_data, tiny_model, "--datasets", "sst"), cwd=tmp_path)
    _one_line_error(out, r"pred: is a file, but the run writes a folder there")
    assert not (tmp_path / "ck").exists()  # nothing trained, nothing saved
    (tmp_path / "blocker").write_text("a file")
    out = _cli("multitask_classifier.py", "--pretrained", str(tiny_model), "--data_dir", str(course_data),
               "--sst_dev_out", str(tmp_path / "blocker" / "sst-dev.csv"), cwd=tmp_path)
    _one_line_error(out, r"blocker: is a file, but the run writes .*sst-dev.csv inside it")
    assert not (tmp_path / "runs").exists()


# ----------------------------------------------------------------------------- Ctrl-C

def test_ctrl_c_is_one_line_naming_the_checkpoint_and_how_to_resume(tmp_path, course_data, tiny_model, monkeypatch,
                                                                     capsys):
    interrupt_second_epoch(monkeypatch)
    args = _part1(tmp_path, course_data, tiny_model, "--datasets", "sst", "--fine-tune-mode", "full-model")
    with pytest.raises(SystemExit) as e:
        main_guard(lambda: classifier.main(args))
    assert e.value.code == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0]
    assert f"sst epoch 0 is saved in {tmp_path / 'ck' / 'full-model-sst-last.pt'}" in err[0]
    assert f"the same command plus --resume --run_dir {tmp_path / 'ck'} continues from there" in err[0]


def test_ctrl_c_before_any_checkpoint_says_so(capsys):
    set_interrupt_hint(None)

    def main():
        raise KeyboardInterrupt
    with pytest.raises(SystemExit):
        main_guard(main)
    assert capsys.readouterr().err.strip() == "interrupted: nothing was saved yet"


def test_a_model_larger_than_memory_is_one_line(tmp_path, course_data, tiny_model):
    """A size flag far beyond the machine (a 10^12-unit shared head: 128 TB) is refused by the allocator at once;
    the user sees one line saying so, not torch's traceback."""
    out = subprocess.run([sys.executable, str(ROOT / "multitask_classifier.py"),
                          *_part2(tmp_path, course_data, tiny_model, "--shared_head", str(10 ** 12))],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr[-2000:]
    err = out.stderr.strip().splitlines()
    assert len(err) == 1 and re.match(r"error: out of memory: torch could not allocate [\d,.]+ GiB on this machine; "
                                      r".*lower --batch_size", err[0]), err


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


# ----------------------------------------------------------------------------- the minor ones

def test_every_dev_id_is_predicted_even_a_broken_row(tmp_path, course_data, tiny_model):
    dev = course_data / "quora-dev.csv"
    lines = dev.read_bytes().decode().split("\r\n")
    broken = lines[3].split("\t")[1]
    lines[3] = "\t".join(lines[3].split("\t")[:2]) + '\t"An unbalanced quote?'
    dev.write_bytes("\r\n".join(lines).encode())
    out = tmp_path / "para-dev.csv"
    scores = mt.main(["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--epochs", "1",
                      "--batch_size", "8", "--checkpoint", str(tmp_path / "ck" / "mt.pt"), "--para_dev_out", str(out),
                      "--results", str(tmp_path / "r.csv")] + [
        f"--{t}_{s}_out={tmp_path / f'{t}-{s}.csv'}" for t in ("sst", "sts", "para") for s in ("dev", "test")
        if (t, s) != ("para", "dev")])
    ids = [l.split(" , ")[0] for l in out.read_text().splitlines()[1:]]
    assert broken in ids and len(ids) == len(lines) - 2  # header and the trailing empty line
    from evaluation import score_file
    r = score_file(out, dev)
    assert not r["missing"] and r["n"] == len(ids) - 1 and r["accuracy"] == pytest.approx(scores["quora"])


def test_damaged_weights_in_a_users_own_folder_are_not_to_be_deleted(tmp_path, tiny_model):
    from bert import BertModel
    (tiny_model / "model.safetensors").write_bytes(b"not weights")
    with pytest.raises(MinbertError) as e:
        BertModel.from_pretrained(str(tiny_model))
    assert "replace it with a good copy" in str(e.value) and "delete" not in str(e.value)


def test_damaged_weights_in_the_cache_may_be_downloaded_again(tmp_path, monkeypatch, tiny_model):
    from base_bert import read_state_dict
    monkeypatch.setenv("MINBERT_CACHE", str(tmp_path / "cache"))
    bad = tmp_path / "cache" / "org--m" / "model.safetensors"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"junk")
    with pytest.raises(MinbertError, match="delete it to download it again"):
        read_state_dict(bad)


def test_a_failed_hub_download_leaves_no_empty_cache_folder(tmp_path, file_server, monkeypatch):
    from hub import resolve_pretrained
    monkeypatch.setenv("MINBERT_HF_ENDPOINT", file_server.url)
    monkeypatch.delenv("MINBERT_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    with pytest.raises(MinbertError, match="not found"):
        resolve_pretrained("org/absent", cache=tmp_path / "cache")
    assert not (tmp_path / "cache" / "org--absent").exists()
