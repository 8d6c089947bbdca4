import re
import subprocess
import sys

import numpy as np
import pytest
import torch

import multitask_classifier as mt
from conftest import ROOT, part2_args as _args
from datasets import read_examples

OUTS = {"sst": ("sst", "ids-sst", "Predicted_Sentiment"), "para": ("quora", "quora", "Predicted_Is_Paraphrase"),
        "sts": ("sts", "sts", "Predicted_Similarity")}


def _check_outputs(tmp_path, data):
    for t, (task, stem, header) in OUTS.items():
        for split, src in (("dev", "dev"), ("test", "test-student")):
            lines = (tmp_path / "pred" / f"{t}-{split}-output.csv").read_text().splitlines()
            assert lines[0] == f"id , {header}"
            gold = read_examples(data / f"{stem}-{src}.csv", task, "test" if split == "test" else "dev")
            ids = [l.split(" , ")[0] for l in lines[1:]]
            assert ids == [e.id for e in gold] and len(set(ids)) == len(ids)
            values = [float(l.split(" , ")[1]) for l in lines[1:]]
            if t == "para":
                assert set(values) <= {0.0, 1.0} and all(l.split(" , ")[1] in ("0", "1") for l in lines[1:])
            elif t == "sts":
                assert all(0.0 <= v <= 5.0 for v in values)
            else:
                assert set(values) <= {0.0, 1.0, 2.0, 3.0, 4.0}


@pytest.mark.parametrize("pairs", ["cross", "siamese"])
@pytest.mark.parametrize("training", [["--sampler", "annealed"], ["--sampler", "proportional"],
                                      ["--sampler", "round-robin"], ["--sequential"]])
def test_every_mode_end_to_end(tmp_path, course_data, tiny_model, pairs, training, capsys):
    scores = mt.main(_args(tmp_path, course_data, tiny_model, "--pair_encoding", pairs, *training))
    assert set(scores) == {"sst", "quora", "sts"}
    _check_outputs(tmp_path, course_data)
    rows = (tmp_path / "pred" / "results.csv").read_text().splitlines()
    assert len(rows) == 2 and rows[0].startswith("run,training,pair_encoding")
    expected = "sequential" if training == ["--sequential"] else training[1]
    assert f",{expected},{pairs}," in rows[1]
    assert str(tmp_path / "pred" / "sts-test-output.csv") in capsys.readouterr().out


@pytest.mark.parametrize("pooling", ["cls", "pooler"])
def test_poolings_and_last_linear_layer(tmp_path, course_data, tiny_model, pooling):
    mt.main(_args(tmp_path, course_data, tiny_model, "--pooling", pooling, "--fine-tune-mode", "last-linear-layer",
                  "--epochs", "1"))
    _check_outputs(tmp_path, course_data)
    saved = torch.load(tmp_path / "ck" / "mt.pt", weights_only=True)["model"]
    assert not any(k.startswith("bert.") for k in saved)


def test_eval_only_rewrites_the_same_files(tmp_path, course_data, tiny_model):
    args = _args(tmp_path, course_data, tiny_model, "--pair_encoding", "siamese", "--pooling", "cls")
    trained = mt.main(args)
    before = {p.name: p.read_text() for p in (tmp_path / "pred").glob("*-output.csv")}
    for p in (tmp_path / "pred").glob("*-output.csv"):
        p.unlink()
    # architecture flags not given are taken from the checkpoint
    plain = [a for a in args if a not in ("--pair_encoding", "siamese", "--pooling", "cls")]
    rescored = mt.main(plain + ["--eval_only", str(tmp_path / "ck" / "mt.pt")])
    assert rescored == pytest.approx(trained)
    assert {p.name: p.read_text() for p in (tmp_path / "pred").glob("*-output.csv")} == before


def test_eval_only_with_contradicting_flags_names_them(tmp_path, course_data, tiny_model):
    mt.main(_args(tmp_path, course_data, tiny_model, "--epochs", "1"))
    out = subprocess.run([sys.executable, "multitask_classifier.py",
                          *_args(tmp_path, course_data, tiny_model, "--pair_encoding", "siamese", "--pooling", "mean",
                                 "--eval_only", str(tmp_path / "ck" / "mt.pt"))],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "another configuration: --pair_encoding 'cross' in the checkpoint, 'siamese' given" in out.stderr
    assert "--pooling" not in out.stderr  # same value: not a difference


def test_broken_pair_rows(tmp_path, course_data, tiny_model, capsys):
    train = course_data / "quora-train.csv"
    lines = train.read_bytes().decode().split("\r\n")
    broken_id = lines[3].split("\t")[1]
    lines[3] = "\t".join(lines[3].split("\t")[:2]) + '\t"An unbalanced quote?\t1.0'
    train.write_bytes("\r\n".join(lines).encode())
    test = course_data / "quora-test-student.csv"
    tl = test.read_bytes().decode().split("\r\n")
    test_broken = tl[2].split("\t")[1]
    tl[2] = "\t".join(tl[2].split("\t")[:2]) + '\t"Only one sentence?'
    test.write_bytes("\r\n".join(tl).encode())
    mt.main(_args(tmp_path, course_data, tiny_model, "--epochs", "1"))
    out = capsys.readouterr().out
    assert re.search(rf"quora-train.csv: skipped 1 broken row.*line 4 \(id {broken_id}\): sentence2, is_duplicate empty", out)
    assert re.search(rf"quora-test-student.csv: 1 broken row\(s\) kept.*id {test_broken}", out)
    para_test = (tmp_path / "pred" / "para-test-output.csv").read_text()
    assert f"{test_broken} , " in para_test  # the leaderboard needs every id


@pytest.mark.parametrize("fname, col, value, match", [
    ("sts-train.csv", 4, "5.2", r"sts-train.csv: line 3: similarity '5.2' is outside 0..5"),
    ("quora-dev.csv", 4, "2.0", r"quora-dev.csv: line 3: is_duplicate '2.0' is outside 0..1"),
    ("quora-train.csv", 4, "yes", r"quora-train.csv: line 3: is_duplicate 'yes' is not a number"),
])
def test_bad_pair_labels(tmp_path, course_data, tiny_model, fname, col, value, match):
    p = course_data / fname
    nl = "\r\n" if fname.startswith("quora") else "\n"
    lines = p.read_bytes().decode().split(nl)
    cells = lines[2].split("\t")
    cells[col] = value
    lines[2] = "\t".join(cells)
    p.write_bytes(nl.join(lines).encode())
    out = subprocess.run([sys.executable, "multitask_classifier.py", *_args(tmp_path, course_data, tiny_model)],
                         cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 2 and re.search(match, out.stderr), out.stderr
    assert not (tmp_path / "pred").exists()


def test_samplers():
    from sampling import annealed_alpha, task_schedule
    sizes = {"sst": 8000, "quora": 14000, "sts": 6000}
    rng = np.random.default_rng(0)
    rr = task_schedule(sizes, "round-robin", 9, 0, 3, rng, 32)
    assert rr == ["sst", "quora", "sts"] * 3
    prop = task_schedule(sizes, "proportional", 28000, 0, 3, rng, 32)
    assert abs(prop.count("quora") / 28000 - 0.5) < 0.02
    assert annealed_alpha(0, 5) == 1.0 and annealed_alpha(4, 5) == pytest.approx(0.2)
    last = task_schedule(sizes, "annealed", 28000, 4, 5, rng, 32)
    p = np.array([8000, 14000, 6000]) ** 0.2
    assert abs(last.count("quora") / 28000 - p[1] / p.sum()) < 0.02
    seq = task_schedule(sizes, "sequential", 28, 0, 3, rng, 1000)
    assert seq == ["sst"] * 8 + ["quora"] * 14 + ["sts"] * 6
    half = task_schedule(sizes, "sequential", 14, 0, 3, rng, 1000)  # a step budget, shared alike
    assert half == ["sst"] * 4 + ["quora"] * 7 + ["sts"] * 3


def test_siamese_heads(tiny_model):
    from checkpoint import ModelSpec
    m = mt.MultitaskBERT(ModelSpec(pretrained=str(tiny_model), pair_encoding="siamese", dropout=[0.0] * 3)).eval()
    a = torch.tensor([[2, 7, 9, 3, 0], [2, 10, 11, 12, 3]])
    b = torch.tensor([[2, 7, 9, 3], [2, 20, 21, 3]])
    ma, mb = (a != 0).long(), (b != 0).long()
    with torch.no_grad():
        u, v = m(a, ma), m(b, mb)  # forward: the sentence embeddings (mean pooling)
        sim = m.predict_similarity(a, ma, b, mb)
    torch.testing.assert_close(sim, 5 * torch.relu(torch.cosine_similarity(u, v)))
    assert sim[0].item() == pytest.approx(5.0, abs=1e-4)  # the same sentence, padded differently
    assert m.predict_paraphrase(a, ma, b, mb).shape == (2,)
    with pytest.raises(ValueError, match="needs both sentences"):
        m.predict_paraphrase(a, ma)


def test_eval_only_says_which_max_length_it_uses(tmp_path, course_data, tiny_model, capsys):
    args = _args(tmp_path, course_data, tiny_model, "--epochs", "1", "--max_length", "32")
    mt.main(args)
    capsys.readouterr()
    mt.main(_args(tmp_path / "e", course_data, tiny_model, "--eval_only", str(tmp_path / "ck" / "mt.pt")))
    assert "tokenizing at" not in capsys.readouterr().out  # the checkpoint's own 32, as trained
    mt.main(_args(tmp_path / "e", course_data, tiny_model, "--max_length", "8", "--eval_only", str(tmp_path / "ck" / "mt.pt")))
    assert "tokenizing at --max_length 8 (the model was trained at 32)" in capsys.readouterr().out


def test_a_dev_file_that_is_the_training_file_is_named_in_one_line(tmp_path, course_data, tiny_model, capsys):
    # Legal (a check that the model fits its data) but the dev scores then mean something else: one note, and
    # only for the task whose files coincide.
    train = course_data / "ids-sst-train.csv"
    mt.main(_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "1", "--sst_dev", str(train)))
    notes = [l for l in capsys.readouterr().out.splitlines() if l.startswith("note:")]
    assert notes == [f"note: --sst_dev {train} is the --sst_train file: its dev scores measure the training data, "
                     f"not held-out data"]


def test_all_loss_weights_zero_is_refused(tmp_path, course_data, tiny_model):
    from utils import MinbertError
    with pytest.raises(MinbertError, match=r"--loss_weights 0 0 0: every task's loss is switched off"):
        mt.main(_args(tmp_path, course_data, tiny_model, "--loss_weights", "0", "0", "0"))


def test_a_shared_head_layer_is_trained_by_every_task_and_each_keeps_its_output(tiny_model):
    from checkpoint import ModelSpec
    from utils import MinbertError
    model = mt.MultitaskBERT(ModelSpec(pretrained=str(tiny_model), shared_head=8, dropout=[0.0] * 3))
    assert model.sst_head[-1].in_features == model.para_head[-1].in_features == model.sts_head[-1].in_features == 8
    ids = torch.tensor([[2, 7, 8, 3, 9, 10, 3]])
    mask, types = torch.ones_like(ids), torch.tensor([[0, 0, 0, 0, 1, 1, 1]])
    for task, out in (("sst", lambda: model.predict_sentiment(ids, mask)),
                      ("quora", lambda: model.predict_paraphrase(ids, mask, token_type_ids=types)),
                      ("sts", lambda: model.predict_similarity(ids, mask, token_type_ids=types))):
        model.zero_grad(set_to_none=True)
        out().sum().backward()
        with_grad = {n.split(".")[0] for n, p in model.named_parameters() if p.grad is not None}
        assert "shared" in with_grad and {"sst": "sst_head", "quora": "para_head", "sts": "sts_head"}[task] in with_grad
        assert len(with_grad & {"sst_head", "para_head", "sts_head"}) == 1  # the other tasks' outputs are untouched
    with pytest.raises(MinbertError, match="--shared_head shares a hidden layer .* with --pair_encoding siamese"):
        mt.get_args(["--shared_head", "8", "--pair_encoding", "siamese"])


def test_a_shared_head_run_rescores_from_its_checkpoint(tmp_path, course_data, tiny_model):
    trained = mt.main(_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--shared_head", "16",
                            "--pair_encoding", "mixed"))
    rescored = mt.main(_args(tmp_path, course_data, tiny_model, "--eval_only", str(tmp_path / "ck" / "mt.pt")))
    assert rescored == pytest.approx(trained)
