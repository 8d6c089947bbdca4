"""flags/parsers.py: the pipelines' parsers, declared once: which flags were typed, --recipe handout's defaults
(explicit flags winning), and the data files' defaults under --data_dir."""
from minbert.flags.defaults import MULTITASK_HANDOUT
from minbert.flags.parsers import classifier_parser, given_flags, multitask_parser, pretrain_parser
from minbert.flags.settings import parse_flags


def test_given_flags_are_the_ones_typed_not_the_defaults():
    ap = multitask_parser()
    assert given_flags(ap, ["--lr", "1e-3", "--no_bucket", "--fine-tune-mode=lora"]) == {"lr", "bucket", "fine_tune_mode"}
    assert given_flags(ap, []) == set()
    assert ap.parse_args([]).lr is None  # parsing again afterwards still sees the defaults


def test_the_handout_recipe_changes_the_defaults_and_typed_flags_win():
    args = parse_flags(multitask_parser(), ["--recipe", "handout", "--batch_size", "16"], MULTITASK_HANDOUT)
    assert (args.scheduler, args.warmup_ratio, args.rdrop_weight, args.lr) == ("constant", 0.0, 0.0, 1e-5)
    assert args.batch_size == 16 and args.typed == {"recipe", "batch_size"}
    assert "typed" not in vars(args)  # what the flags hold, apart from which were typed
    best = parse_flags(multitask_parser(), [], MULTITASK_HANDOUT)
    assert (best.scheduler, best.rdrop_weight, best.lr) == ("linear", 2.0, None)


def test_every_pipeline_parser_builds_and_names_itself():
    for build, prog in ((classifier_parser, "classifier.py"), (multitask_parser, "multitask_classifier.py"),
                        (pretrain_parser, "pretrain.py")):
        assert build().prog == prog
    assert multitask_parser().parse_args([]).sst_train is None  # filled from --data_dir by settings.py
