"""flags/typed.py: which flags were typed, --recipe handout's defaults (explicit flags winning), and a typed flag
that would change nothing refused in one line."""
import pytest

from minbert.cli import MinbertError
from minbert.flag import P2
from minbert.flags.defaults import handout, rule
from minbert.flags.parsers import multitask_parser
from minbert.flags.typed import check_idle_flags, given_flags, parse_flags


def test_given_flags_are_the_ones_typed_not_the_defaults():
    ap = multitask_parser()
    assert given_flags(ap, ["--lr", "1e-3", "--no_bucket", "--fine-tune-mode=lora"]) == {"lr", "bucket", "fine_tune_mode"}
    assert given_flags(ap, []) == set()
    assert ap.parse_args([]).lr is None  # parsing again afterwards still sees the defaults


def test_the_handout_recipe_changes_the_defaults_and_typed_flags_win():
    args = parse_flags(multitask_parser(), ["--recipe", "handout", "--batch_size", "16"], handout(P2))
    assert (args.scheduler, args.warmup_ratio, args.rdrop_weight, args.lr) == ("constant", 0.0, 0.0, 1e-5)
    assert args.batch_size == 16 and args.typed == {"recipe", "batch_size"}
    assert "typed" not in vars(args)  # what the flags hold, apart from which were typed
    best = parse_flags(multitask_parser(), [], handout(P2))
    assert (best.scheduler, best.rdrop_weight, best.lr) == ("linear", rule("rdrop_weight", P2).value, None)


def test_a_typed_flag_its_rule_says_is_idle_is_refused_and_an_untyped_one_is_not():
    rules = {"alpha": (lambda flags, typed: flags["compare"], "belongs to --compare"),
             "fine_tune_mode": (lambda flags, typed: True, "never idle")}
    check_idle_flags({"compare": False, "alpha": 0.05}, set(), rules)  # left at its default: nothing to refuse
    check_idle_flags({"compare": True, "alpha": 0.01}, {"alpha"}, rules)
    with pytest.raises(MinbertError, match=r"^--alpha belongs to --compare: as given it would change nothing, so it "
                                           r"is refused rather than ignored"):
        check_idle_flags({"compare": False, "alpha": 0.01}, {"alpha", "fine_tune_mode"}, rules)
    with pytest.raises(MinbertError, match=r"^--fine-tune-mode x"):  # a flag named by its own spelling
        check_idle_flags({}, {"fine_tune_mode"}, {"fine_tune_mode": (lambda flags, typed: False, "x")})
