"""pipelines/multitask.py: Part 2 end to end with every sampler, encoding, pooling and lever; --eval_only
rewrites the same files; every dev id is predicted, even a broken row's; the notes and refusals of bad data."""
import json
import math
import re

import pytest
import torch

import multitask_classifier as mt
from minbert.course_data import read_examples
from tests.course import eval_only_args, overridden, part2_args
from tests.processes import run_main
from utils import MinbertError


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
        f"--{t}_{s}_out={tmp_path / f'{t}-{s}-output.csv'}" for t in ("sst", "sts", "para") for s in ("dev", "test")
        if (t, s) != ("para", "dev")])
    ids = [l.split(" , ")[0] for l in out.read_text().splitlines()[1:]]
    assert broken in ids and len(ids) == len(lines) - 2  # header and the trailing empty line
    from evaluation import score_file
    r = score_file(out, dev)
    assert not r["missing"] and r["n"] == len(ids) - 1 and r["accuracy"] == pytest.approx(scores["quora"])


@pytest.mark.parametrize("extra", [["--sampler", "all"], ["--sampler", "all", "--pcgrad"],
                                   ["--smart_weight", "1.0"], ["--rdrop_weight", "1.0"],
                                   ["--smart_bregman_weight", "1.0"],
                                   ["--pair_encoding", "siamese", "--smart_weight", "1.0", "--rdrop_weight", "1.0"]])
def test_multitask_runs_with_every_lever(tmp_path, course_data, tiny_model, extra):
    """Each lever alone (the others off), and each one shows that it acted."""
    outs = [f"--{t}_{s}_out={tmp_path / f'{t}-{s}-output.csv'}" for t in ("sst", "para", "sts") for s in ("dev", "test")]
    scores = mt.main(overridden(["--pretrained", str(tiny_model), "--data_dir", str(course_data), "--epochs", "2",
                                 "--batch_size", "8", "--fine-tune-mode", "full-model", "--lr", "1e-3", "--llrd",
                                 "0.8", "--smart_weight", "0", "--rdrop_weight", "0", "--checkpoint",
                                 str(tmp_path / "ck" / "mt.pt"), "--results", str(tmp_path / "r.csv"), *outs],
                                extra))
    assert set(scores) == {"sst", "quora", "sts"} and all(math.isfinite(v) for v in scores.values())
    log = [json.loads(l) for l in (tmp_path / "ck" / "mt-log.jsonl").read_text().splitlines()]
    terms = log[0]["loss_terms"]
    for flag, term in (("--smart_weight", "smart"), ("--rdrop_weight", "rdrop"), ("--smart_bregman_weight", "bregman")):
        assert (term in terms and terms[term] > 0) == (flag in extra), (flag, terms)
    assert ("pcgrad_conflicts" in log[0]) == ("--pcgrad" in extra)
    if "--pcgrad" in extra:  # three tasks' gradients, compared pairwise every step: some pairs conflict
        assert sum(r["pcgrad_conflicts"] for r in log) > 0
    if "all" in extra:
        assert log[0]["batches"]["sst"] == log[0]["batches"]["quora"] == log[0]["batches"]["sts"]
    saved = torch.load(tmp_path / "ck" / "mt.pt", weights_only=True)
    siamese = "siamese" in extra  # the siamese path: [u, v, |u-v|, u*v] into the paraphrase head, no STS head
    assert (saved["model"]["para_head.1.weight"].shape[1] == 4 * 32) == siamese
    assert ("sts_head.1.weight" in saved["model"]) != siamese


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
    scores = mt.main(part2_args(tmp_path, course_data, tiny_model, "--pair_encoding", pairs, *training))
    assert set(scores) == {"sst", "quora", "sts"}
    _check_outputs(tmp_path, course_data)
    rows = (tmp_path / "pred" / "results.csv").read_text().splitlines()
    assert len(rows) == 2 and rows[0].startswith("run,training,pair_encoding")
    expected = "sequential" if training == ["--sequential"] else training[1]
    assert f",{expected},{pairs}," in rows[1]
    assert str(tmp_path / "pred" / "sts-test-output.csv") in capsys.readouterr().out


@pytest.mark.parametrize("pooling", ["cls", "pooler"])
def test_poolings_and_last_linear_layer(tmp_path, course_data, tiny_model, pooling):
    mt.main(part2_args(tmp_path, course_data, tiny_model, "--pooling", pooling, "--fine-tune-mode", "last-linear-layer",
                  "--epochs", "1"))
    _check_outputs(tmp_path, course_data)
    saved = torch.load(tmp_path / "ck" / "mt.pt", weights_only=True)["model"]
    assert not any(k.startswith("bert.") for k in saved)


def test_eval_only_rewrites_the_same_files(tmp_path, course_data, tiny_model):
    args = part2_args(tmp_path, course_data, tiny_model, "--pair_encoding", "siamese", "--pooling", "cls")
    trained = mt.main(args)
    before = {p.name: p.read_text() for p in (tmp_path / "pred").glob("*-output.csv")}
    for p in (tmp_path / "pred").glob("*-output.csv"):
        p.unlink()
    # architecture flags not given are taken from the checkpoint
    plain = [a for a in args if a not in ("--pair_encoding", "siamese", "--pooling", "cls")]
    rescored = mt.main(eval_only_args(plain, tmp_path / "ck" / "mt.pt", tmp_path / "eval"))
    assert rescored == pytest.approx(trained)
    assert {p.name: p.read_text() for p in (tmp_path / "pred").glob("*-output.csv")} == before


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
    mt.main(part2_args(tmp_path, course_data, tiny_model, "--epochs", "1"))
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
    out = run_main("multitask_classifier.py", *part2_args(tmp_path, course_data, tiny_model))
    assert out.returncode == 2 and re.search(match, out.stderr), out.stderr
    assert not (tmp_path / "pred").exists()


def test_eval_only_says_which_max_length_it_uses(tmp_path, course_data, tiny_model, capsys):
    args = part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--max_length", "32")
    mt.main(args)
    capsys.readouterr()
    mt.main(part2_args(tmp_path / "e", course_data, tiny_model, "--eval_only", str(tmp_path / "ck" / "mt.pt")))
    assert "tokenizing at" not in capsys.readouterr().out  # the checkpoint's own 32, as trained
    mt.main(part2_args(tmp_path / "e", course_data, tiny_model, "--max_length", "8", "--eval_only", str(tmp_path / "ck" / "mt.pt")))
    assert "tokenizing at --max_length 8 (the model was trained at 32)" in capsys.readouterr().out


def test_a_dev_file_that_is_the_training_file_is_named_in_one_line(tmp_path, course_data, tiny_model, capsys):
    # Legal (a check that the model fits its data) but the dev scores then mean something else: one note, and
    # only for the task whose files coincide.
    train = course_data / "ids-sst-train.csv"
    mt.main(part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--steps_per_epoch", "1", "--sst_dev", str(train)))
    notes = [l for l in capsys.readouterr().out.splitlines() if l.startswith("note:")]
    assert notes == [f"note: --sst_dev {train} is the --sst_train file: its dev scores measure the training data, "
                     f"not held-out data"]


def test_a_data_file_missing_is_named_by_the_flag_that_gave_it_before_any_is_read(tmp_path, course_data, tiny_model,
                                                                                 monkeypatch):
    """A typed path is named by its flag, with no setup.sh hint (it is no remedy there); a default one keeps it."""
    from minbert.pipelines import multitask
    monkeypatch.setattr(multitask, "train_part2", lambda *a: pytest.fail("a run started with a data file missing"))
    with pytest.raises(MinbertError, match=rf"^--sts_test {re.escape(str(tmp_path / 'no.csv'))}: data file not "
                                           r"found$"):
        mt.main(part2_args(tmp_path, course_data, tiny_model, "--sts_test", str(tmp_path / "no.csv")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(MinbertError, match=r"ids-sst-train.csv: data file not found \(run setup.sh, or pass "
                                           r"--data_dir\)$"):
        mt.main(part2_args(tmp_path, tmp_path / "empty", tiny_model))


def test_a_shared_head_run_rescores_from_its_checkpoint(tmp_path, course_data, tiny_model):
    trained = mt.main(part2_args(tmp_path, course_data, tiny_model, "--epochs", "1", "--shared_head", "16",
                            "--pair_encoding", "mixed"))
    rescored = mt.main(part2_args(tmp_path, course_data, tiny_model, "--eval_only", str(tmp_path / "ck" / "mt.pt")))
    assert rescored == pytest.approx(trained)


def test_eval_only_takes_a_run_folder_for_its_best_checkpoint(tmp_path, course_data, tiny_model, trained_part2,
                                                               capsys):
    """--eval_only runs/NAME re-scores the folder's best checkpoint (as the checkpoint itself does); a Part 1 run's
    folder is named for what it is."""
    import classifier
    from tests.course import output_files, part1_args
    run = trained_part2
    mt.main(part2_args(tmp_path / "e", run.data, run.model, "--eval_only", str(run.checkpoint.parent)))
    assert (f"--eval_only {run.checkpoint.parent}: a run folder; its checkpoint {run.checkpoint} is re-scored"
            in capsys.readouterr().out)
    assert output_files(tmp_path / "e" / "pred") == output_files(run.predictions)
    classifier.main(part1_args(tmp_path / "p1", course_data, tiny_model, "--epochs", "1", "--datasets", "sst"))
    with pytest.raises(MinbertError, match=r"--eval_only .*p1/ck: the folder of a classifier.py run; --eval_only "
                                           r"takes a multitask_classifier.py run's checkpoint or folder"):
        mt.main(part2_args(tmp_path / "f", course_data, tiny_model, "--eval_only", str(tmp_path / "p1" / "ck")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(MinbertError, match=r"--eval_only .*empty: a folder with no best checkpoint"):
        mt.main(part2_args(tmp_path / "g", course_data, tiny_model, "--eval_only", str(tmp_path / "empty")))
