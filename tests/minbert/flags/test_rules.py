"""flags/rules.py: a flag typed where it would change nothing, and flags that cannot work together, are one line
before anything trains; the same flags where they act are taken."""
import re

import pytest

import classifier
import multitask_classifier as mt
from tests.course import part2_args
from tests.processes import run_main
from utils import MinbertError

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
    args = script.get_args(["--pretrained", "all-minilm-l6-v2", *argv])
    flags = [a for a in argv if a.startswith("--")]
    assert {f[2:].replace("-", "_") for f in flags} <= args.typed
    for i, flag in enumerate(argv):  # each value reaches the parsed flags as typed
        values = []
        for v in argv[i + 1:]:
            if v.startswith("--"):
                break
            values.append(v)
        if flag.startswith("--") and values:
            got = getattr(args, flag[2:].replace("-", "_"))
            got = got if isinstance(got, list) else [got]
            assert [str(g) if isinstance(g, str) else float(g) for g in got] == \
                [v if isinstance(g, str) else float(v) for g, v in zip(got, values)], flag


def test_a_dataset_given_twice_is_refused():
    """(cli.Parser refuses a value given twice to any flag of several values.)"""
    with pytest.raises(MinbertError, match="^classifier.py: --datasets: sst given twice; each value acts once"):
        classifier.get_args(["--datasets", "sst", "cfimdb", "sst"])
    with pytest.raises(MinbertError, match="^classifier.py: --datasets: sst given twice; each value acts once"):
        classifier.get_args(["--datasets", "sst", "--datasets", "sst"])


def test_pcgrad_needs_the_all_sampler():
    with pytest.raises(MinbertError, match="--pcgrad needs the gradients of every task in one step"):
        mt.get_args(["--pcgrad"])


def test_smart_refuses_cached_features():
    with pytest.raises(MinbertError, match="last-linear-layer trains on cached"):
        classifier.get_args(["--smart_weight", "1", "--fine-tune-mode", "last-linear-layer"])


def test_all_loss_weights_zero_is_refused(tmp_path, course_data, tiny_model):
    from utils import MinbertError
    with pytest.raises(MinbertError, match=r"--loss_weights 0 0 0: every task's loss is switched off"):
        mt.main(part2_args(tmp_path, course_data, tiny_model, "--loss_weights", "0", "0", "0"))


def test_cross_pairs_refuse_embedding_losses_in_one_line(tmp_path, course_data, tiny_model):
    out = run_main("multitask_classifier.py", *part2_args(tmp_path, course_data, tiny_model, "--mnrl_weight", "1"))
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "--mnrl_weight works on sentence embeddings" in out.stderr and "--pair_encoding siamese (or mixed)" in out.stderr


def test_distillation_settings_act_only_with_distill():
    with pytest.raises(MinbertError, match="--distill_weight shapes the distillation loss, which is off"):
        mt.get_args(["--distill_weight", "0.3"])


def test_gradvac_needs_every_task_in_a_step_and_is_not_pcgrad():
    from utils import MinbertError
    with pytest.raises(MinbertError, match="--gradvac needs the gradients of every task in one step"):
        mt.get_args(["--gradvac"])
    with pytest.raises(MinbertError, match="--pcgrad and --gradvac are two ways"):
        mt.get_args(["--gradvac", "--pcgrad", "--sampler", "all"])


def test_pretrain_refuses_a_data_dir_that_texts_replaces():
    """pretrain.py reads --texts instead of the course CSVs in --data_dir: both given, --data_dir would do nothing."""
    import pretrain
    from minbert.flags.settings import parse_pretrain
    with pytest.raises(MinbertError, match=r"--data_dir is where the course CSVs' training sentences are read, which "
                                           r"--texts replaces as the text: .*" + IDLE):
        pretrain.main(["--texts", "t.txt", "--data_dir", "elsewhere", "--out", "o"])
    assert parse_pretrain(["--data_dir", "elsewhere", "--out", "o"]).data_dir == "elsewhere"
    assert parse_pretrain(["--texts", "t.txt", "--out", "o"]).texts == "t.txt"


@pytest.mark.parametrize("argv, match", [
    (["--optimizer", "lion", "--no_fused"], "--no_fused switches off AdamW's fused pass, which --optimizer lion"),
    (["--no_foreach", "--no_fused"], "--no_fused switches off AdamW's fused pass"),
    (["--shared_head", "16", "--pair_encoding", "siamese"], "--shared_head shares a hidden layer"),
    (["--smart_weight", "1", "--freeze_layers", "2", "--fine-tune-mode", "full-model"],
     "--smart_weight needs the gradient at BERT's embeddings, which frozen layers"),
    (["--smart_weight", "1", "--gradual_unfreeze", "10", "--fine-tune-mode", "full-model"],
     "--smart_weight needs the gradient at BERT's embeddings, which frozen layers"),
])
def test_each_clash_is_refused_on_its_own(argv, match):
    """Each side of a rule alone sets it off (either freezing flag; lion or --no_foreach): one line."""
    with pytest.raises(MinbertError, match=re.escape(match)):
        mt.get_args(["--pretrained", "all-minilm-l6-v2", *argv])


@pytest.mark.parametrize("argv", [
    ["--no_fused"],                                             # AdamW with its foreach pass: the flag acts
    ["--shared_head", "16", "--pair_encoding", "mixed"],        # mixed cross-encodes Quora: a head to share
    ["--loss_weights", "1", "0", "1"],                          # one task off, the others train
    ["--rdrop_weight", "0"],                                    # a regulariser's weight typed at 0: switches it off
    ["--smart_weight", "1", "--fine-tune-mode", "full-model"],  # SMART on an unfrozen BERT
])
def test_the_other_side_of_each_rule_is_taken(argv):
    args = mt.get_args(["--pretrained", "all-minilm-l6-v2", *argv])
    assert {a[2:].split("=")[0].replace("-", "_") for a in argv if a.startswith("--")} <= args.typed | {"no_fused"}
