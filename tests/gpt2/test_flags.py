"""gpt2/flags.py: the handout's flags and defaults; levers that reach into BERT's modules are refused in one line;
--max_length is held to the model's positions."""
import pytest

from gpt2.flags import classifier_parser, classifier_settings, parse_classifier
from minbert.flags.typed import parse_flags
from minbert.specs import ModelSpec
from utils import MinbertError


def test_defaults_and_refused_levers(tiny_gpt2, course_data):
    base = ["--pretrained", str(tiny_gpt2), "--data_dir", str(course_data)]
    s = classifier_settings(parse_flags(classifier_parser(), base))
    assert (s.model.fine_tune_mode, s.recipe.lr, s.batch_size, s.model.dropout, s.recipe.epochs) == \
        ("last-linear-layer", 1e-3, 8, (0.3,), 10)
    assert s.model.max_length == 64  # the tiny model's positions, not the handout's 512
    full = classifier_settings(parse_flags(classifier_parser(), base + ["--fine-tune-mode", "full-model"]))
    assert full.recipe.lr == 1e-5
    for flag in (["--smart_weight", "1"], ["--freeze_layers", "1"], ["--llrd", "0.9"]):
        with pytest.raises(MinbertError, match=rf"{flag[0]} .*: not available for GPT-2"):
            classifier_settings(parse_flags(classifier_parser(), base + flag))
    with pytest.raises(MinbertError, match="--lora_rank configures LoRA/DoRA adapters, but --fine-tune-mode is full-model"):
        classifier_settings(parse_flags(classifier_parser(), base + ["--fine-tune-mode", "full-model", "--lora_rank", "4"]))
    with pytest.raises(MinbertError, match="--adapter_dim 8 sizes Houlsby adapters, but --fine-tune-mode is last-linear"):
        classifier_settings(parse_flags(classifier_parser(), base + ["--adapter_dim", "8"]))
    with pytest.raises(MinbertError, match=r"--prefix_length \(prefix tuning is BERT's here: GPT-2 has no "
                                           r"--fine-tune-mode prefix\): not available for GPT-2; drop it"):
        classifier_settings(parse_flags(classifier_parser(), base + ["--prefix_length", "4"]))
    assert "--prefix_length" not in classifier_parser().format_help()
    # typed at its default value, a flag of a mode the run does not train still does nothing: refused the same
    for flag in (["--lora_rank", str(ModelSpec().lora_rank)], ["--adapter_dim", str(ModelSpec().adapter_dim)]):
        with pytest.raises(MinbertError, match=rf"^{flag[0]} .*but --fine-tune-mode is full-model"):
            classifier_settings(parse_flags(classifier_parser(), base + ["--fine-tune-mode", "full-model", *flag]))
    lora = classifier_settings(parse_flags(classifier_parser(), base + ["--fine-tune-mode", "lora", "--merge"]))
    assert lora.merge and lora.model.lora_targets == ("query", "value") and lora.recipe.lr == 1e-3


def test_recipe_handout_is_applied_and_a_typed_flag_wins(tiny_gpt2, course_data):
    from gpt2.flags import parse_paraphrase, parse_sonnets, sonnet_settings
    base = ["--pretrained", str(tiny_gpt2), "--data_dir", str(course_data)]
    best = classifier_settings(parse_classifier(base)).recipe
    assert (best.scheduler, best.warmup_ratio) == ("linear", 0.1)
    for parse, settings in ((parse_classifier, classifier_settings), (parse_paraphrase, classifier_settings),
                            (parse_sonnets, sonnet_settings)):
        handout = settings(parse(base[:2] + ["--recipe", "handout"])).recipe
        assert (handout.scheduler, handout.warmup_ratio, handout.max_grad_norm) == ("constant", 0.0, 0.0)
    typed = classifier_settings(parse_classifier(base + ["--recipe=handout", "--warmup_ratio", "0.2"])).recipe
    assert (typed.scheduler, typed.warmup_ratio) == ("constant", 0.2)


@pytest.mark.parametrize("argv, message", [
    (["--smart_step", "0.01"], "--smart_step shapes SMART's adversarial term, which GPT-2 does not have"),
    (["--smart_dropout"], "--smart_dropout shapes SMART's adversarial term, which GPT-2 does not have"),
    (["--smart_momentum", "0.9"], "--smart_momentum is the momentum of SMART's Bregman teacher"),
    (["--compile"], "--compile compiles GPT-2's forward, which --fine-tune-mode last-linear-layer runs once"),
    (["--optimizer", "lion", "--no_foreach"], "--no_foreach switches off AdamW's multi-tensor kernels"),
])
def test_a_flag_that_would_change_nothing_is_refused(argv, message):
    with pytest.raises(MinbertError, match=message + ".*"):
        parse_classifier(argv)


def test_each_scripts_idle_flags_are_refused():
    from gpt2.flags import parse_paraphrase, parse_sonnets
    with pytest.raises(MinbertError, match="--smart_steps shapes SMART's adversarial term"):
        parse_sonnets(["--smart_steps", "2"])
    with pytest.raises(MinbertError, match="--predictions_dir is where the two files go that --para_dev_out and "
                                           "--para_test_out both name already"):
        parse_paraphrase(["--para_dev_out", "a.csv", "--para_test_out", "b.csv", "--predictions_dir", "p"])
    parse_paraphrase(["--para_dev_out", "a.csv", "--predictions_dir", "p"])  # the test file still goes there


def test_flags_gpt2_does_not_use_are_refused_where_typed():
    from gpt2.flags import parse_paraphrase, parse_sonnets
    with pytest.raises(MinbertError, match="--no_fast_dropout switches off minBERT's bulk dropout masks, which GPT-2"):
        parse_sonnets(["--no_fast_dropout"])
    for flag in (["--hidden_dropout_prob", "0.1"], ["--head_lr", "1e-3"]):
        with pytest.raises(MinbertError, match=rf"{flag[0]} .*: as given it would change nothing"):
            parse_paraphrase(flag)
    with pytest.raises(MinbertError, match=r"--head_lr is the learning rate of task heads, and every weight here is"):
        parse_sonnets(["--head_lr", "1e-3"])
    parse_classifier(["--head_lr", "1e-3", "--hidden_dropout_prob", "0.1"])  # Part 1 has its head


def test_sonnet_batches_take_no_bucket_and_pad_multiple(tmp_path):
    """--no_bucket and --pad_multiple reach the sonnets' batches (they were parsed and ignored)."""
    from gpt2.flags import parse_sonnets, sonnet_settings
    from gpt2.sonnet_pipeline import SonnetPipeline
    from tests.gpt2.test_sonnet_pipeline import sonnet_argv, sonnet_files
    from tests.checkpoints import make_gpt2_checkpoint
    model = make_gpt2_checkpoint(tmp_path / "m", n_positions=512)
    argv = sonnet_argv(tmp_path, model, sonnet_files(tmp_path / "data"), "--batch_size", "2", "--pad_multiple", "64")
    plain = SonnetPipeline(sonnet_settings(parse_sonnets(argv + ["--no_bucket"])))
    batches = list(plain.batches(0)[0])
    assert all(b["x"]["input_ids"].shape[1] % 64 == 0 for b in batches)
    bucketed = SonnetPipeline(sonnet_settings(parse_sonnets(argv)))
    firsts = lambda p: [b["x"]["input_ids"][0, :4].tolist() for b in p.batches(0)[0]]  # noqa: E731
    assert firsts(plain) != firsts(bucketed)


def test_a_typed_max_length_above_the_models_positions_is_refused(tiny_gpt2):
    """The default is held to the model's positions; a --max_length typed above them was lowered without a word."""
    with pytest.raises(MinbertError, match=r"--max_length 100: .* has 64 positions, so at most --max_length 64"):
        parse_classifier(["--pretrained", str(tiny_gpt2), "--max_length", "100"])
    assert parse_classifier(["--pretrained", str(tiny_gpt2), "--max_length", "64"]).max_length == 64


def test_decoding_flags_that_do_not_apply_are_refused_and_the_rest_reach_the_settings(tiny_gpt2):
    """Beam search's flags without --decoding beam, sampling's with greedy or beam decoding, and no beam at all are
    one line each; --decoding beam's settings reach SonnetSettings."""
    from gpt2.flags import parse_sonnets, sonnet_settings
    for k in ("0", "129", "1000000"):  # none, or more than any GPU's memory holds the cache of
        with pytest.raises(MinbertError, match=rf"^sonnet_generation.py: argument --num_beams: {k} must be a number "
                                               r"of beams from 1 to 128$"):
            parse_sonnets(["--decoding", "beam", "--num_beams", k])
    for k in ("1", "128"):  # the two ends are taken
        assert parse_sonnets(["--decoding", "beam", "--num_beams", k]).num_beams == int(k)
    for argv, message in ((["--decoding", "beam", "--temperature", "1.0"], "--temperature shapes the sampling of "
                                                                           "--decoding sample"),
                          (["--decoding", "greedy", "--top_p", "0.5"], "--top_p shapes the sampling"),
                          (["--num_beams", "2"], "--num_beams shapes beam search, which only --decoding beam runs"),
                          (["--decoding", "greedy", "--no_repeat_ngram_size", "3"], "--no_repeat_ngram_size shapes"),
                          (["--length_penalty", "2"], "--length_penalty shapes beam search"),
                          (["--early_stopping", "true"], "--early_stopping shapes beam search")):
        with pytest.raises(MinbertError, match="^" + message + ".*would change nothing"):
            parse_sonnets(argv)
    for argv, message in ((["--length_penalty", "nan"], "argument --length_penalty: nan must be a finite number"),
                          (["--length_penalty", "inf"], "argument --length_penalty: inf must be a finite number"),
                          (["--length_penalty", "1e308"], "argument --length_penalty: 1e308 must be a number in "
                                                          r"\[-100, 100\]"),
                          (["--early_stopping", "always"], "argument --early_stopping: 'always': choose false "
                                                           r"\(HF's default\), true or never"),
                          (["--max_length", "1"], "--max_length 1: at least 2 tokens, one to predict the next from")):
        with pytest.raises(MinbertError, match=message):
            parse_sonnets(["--decoding", "beam", *argv])
    for edge in ("100", "-100"):  # the bound from inside: a power a float still holds at 1,024 positions
        assert parse_sonnets(["--decoding", "beam", "--length_penalty", edge]).length_penalty == float(edge)
    with pytest.raises(MinbertError, match=r"-100.5 must be a number in \[-100, 100\]"):
        parse_sonnets(["--decoding", "beam", "--length_penalty", "-100.5"])
    s = sonnet_settings(parse_sonnets(["--pretrained", str(tiny_gpt2), "--decoding", "beam", "--num_beams", "2",
                                       "--length_penalty", "-0.5", "--no_repeat_ngram_size", "3"]))
    assert (s.decoding, s.num_beams, s.length_penalty, s.no_repeat_ngram_size, s.early_stopping) == \
        ("beam", 2, -0.5, 3, False)  # HF's default rule
    for typed, rule in (("true", True), ("false", False), ("never", "never")):
        s = sonnet_settings(parse_sonnets(["--pretrained", str(tiny_gpt2), "--decoding", "beam", "--early_stopping",
                                           typed]))
        assert s.early_stopping == rule


@pytest.mark.parametrize("mode, optimizer, lr", [("full-model", "adamw", 1e-5), ("full-model", "lion", 1e-5 / 3),
                                                 ("full-model", "lamb", 5e-5), ("last-linear-layer", "lion", 1e-3 / 3),
                                                 ("lora", "adamw", 1e-3)])
def test_the_default_learning_rate_follows_minberts_rule(tiny_gpt2, mode, optimizer, lr):
    """One rule for both projects: the base rate by what trains (GPT-2's handout's 1e-5 for the whole model, 1e-3
    for new weights), times the optimizer's factor (Lion a third of AdamW's, LAMB five times), for Part 1 and the
    sonnets alike; the reason is on the start line."""
    from gpt2.flags import classifier_settings, parse_classifier, parse_sonnets, sonnet_settings
    from minbert.flags.defaults import factor, source_words, times
    s = classifier_settings(parse_classifier(["--pretrained", str(tiny_gpt2), "--fine-tune-mode", mode,
                                              "--optimizer", optimizer]))
    assert s.recipe.lr == pytest.approx(lr)
    scale = factor(optimizer, "gpt2-classifier")  # the factor's row: its words and source on the start line
    assert s.recipe.lr_why.startswith(f"lr {lr:g}") and (optimizer == "adamw" or f"{times(scale.value)}, source: "
                                                         f"{source_words(scale)}" in s.recipe.lr_why)
    if mode == "full-model":
        sonnets = sonnet_settings(parse_sonnets(["--pretrained", str(tiny_gpt2), "--optimizer", optimizer]))
        assert sonnets.recipe.lr == pytest.approx(lr)
    typed = classifier_settings(parse_classifier(["--pretrained", str(tiny_gpt2), "--fine-tune-mode", mode,
                                                  "--optimizer", optimizer, "--lr", "2e-4"]))
    assert typed.recipe.lr == 2e-4  # a typed rate is taken as it is
