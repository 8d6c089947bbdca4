"""flags/model_rows.py: what trains, on what: Part 2's data files one flag each, and the defaults that are
decisions (Part 1's fine-tune mode, the dropout before a head, pretrain.py's rate and epochs) read from the table of
defaults, each script's help naming the row's source."""
from minbert.course_data import TASK_PREFIX
from minbert.flag import G1, GP, GS, P1, P2, PRE, Chosen
from minbert.flags import defaults, parsers


def _action(script, dest):
    return next(a for a in parsers.parser(script)._actions if a.dest == dest)


def test_part2_takes_a_flag_for_every_tasks_files_and_the_cloze_task_only_its_outputs():
    p2 = vars(parsers.parser(P2).parse_args([]))
    for prefix in TASK_PREFIX.values():
        for split in ("train", "dev", "test"):
            assert p2[f"{prefix}_{split}"] is None  # filled from --data_dir by settings.py
            assert "DATA_DIR" in _action(P2, f"{prefix}_{split}").help
        for split in ("dev", "test"):
            assert p2[f"{prefix}_{split}_out"] == f"predictions/{prefix}-{split}-output.csv"
    cloze = vars(parsers.parser(GP).parse_args([]))
    assert {k for k in cloze if k.endswith("_out")} == {"para_dev_out", "para_test_out"}
    assert cloze["para_dev_out"] is None  # PREDICTIONS_DIR/para-dev-output.csv, as its help says


def test_a_default_a_row_of_the_table_sets_is_the_parsers_with_the_rows_source_in_the_help():
    for dest, scripts in (("fine_tune_mode", (P1, G1)), ("hidden_dropout_prob", (P1, G1, GP)), ("epochs", (PRE,))):
        for script in scripts:
            r, action = defaults.rule(dest, script), _action(script, dest)
            assert action.default == r.value
            assert action.help.endswith(f"(default {defaults.shown(r, r.value)}: {defaults.source_words(r)})")
    assert _action(P2, "fine_tune_mode").default == "full-model"  # no row for Part 2: the flag's own
    assert "(default" not in _action(P2, "hidden_dropout_prob").help
    pretrain = defaults.rule("lr", PRE)
    assert _action(PRE, "lr").default == pretrain.value and isinstance(pretrain.source, Chosen)
    assert f"default {defaults.rate(pretrain.value)} (chosen, not measured: " in _action(PRE, "lr").help
    for script in (P1, P2, G1, GP, GS):  # the other scripts' rates are resolved by the rule: no parser default
        assert _action(script, "lr").default is None
