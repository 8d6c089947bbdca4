"""flags/parsers.py: the pipelines' parsers, declared once, and the data files' defaults under --data_dir."""
from minbert.flags.parsers import classifier_parser, multitask_parser, pretrain_parser


def test_every_pipeline_parser_builds_and_names_itself():
    for build, prog in ((classifier_parser, "classifier.py"), (multitask_parser, "multitask_classifier.py"),
                        (pretrain_parser, "pretrain.py")):
        assert build().prog == prog
    assert multitask_parser().parse_args([]).sst_train is None  # filled from --data_dir by settings.py
