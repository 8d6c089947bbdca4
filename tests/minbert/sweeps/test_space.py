"""sweeps/space.py: a bad --space, an unknown trial flag or a missing dataset is one line before anything trains."""
import pytest

import sweep
from tests.processes import sweep_base
from utils import MinbertError


@pytest.mark.parametrize("argv, match", [
    (["--space", "lr"], r"--space 'lr': expected FLAG=SPEC"),
    (["--space", "lr=log:1e-3"], r"log needs LO:HI"),
    (["--space", "lr=log:1e-3:1e-4"], r"need LO < HI"),
    (["--space", "lr=log:0:1e-4"], r"LO > 0"),
    (["--space", "lernrate=1e-3,1e-4"], r"unrecognized arguments: --lernrate"),
    (["--space", "lr=-1,1e-4"], r"argument --lr: -1 must be a number > 0"),
    (["--space", "lr=log:1e-5:1e-3", "--sampler", "grid"], r"--sampler grid takes comma lists only"),
    (["--space", "lr=1e-3", "--seeds", "5", "5"], r"^sweep.py: --seeds: 5 given twice; each value acts once"),
    (["--space", "lr=1e-3", "--prune_warmup", "-1"], r"--prune_warmup: -1 must be an integer >= 0"),
    (["--space", "lr=1e-3", "--storage", "notaurl"], r"--storage notaurl: not a database URL"),
    (["--space", "seed=1,2"], r"^--space seed=...: --seed is set by the sweep for every trial \(seeds: --seeds\); "
                              r"search another flag$"),
    (["--space", "run_name=a,b"], r"^--space run_name=...: --run_name is set by the sweep for every trial; search "
                                  r"another flag$"),
    (["--space", "lr=1e-4,2e-4", "lr=1e-3"], r"--space names --lr twice \('lr=1e-4,2e-4' and 'lr=1e-3'\)"),
    (["--space", "batch_size=8,16"], r"--batch_size is searched by --space and also fixed after --: drop one of the two"),
    (["--space", "epochs=int:1.5:3"], r"--space 'epochs=int:1.5:3': int bounds must be whole numbers .*epochs=int:1:3"),
    (["--space", "--lr=1e-3,1e-4"], r"^--space --lr=1e-3,1e-4: --space takes FLAG=SPEC items, the pipeline's flag "
                                    r"without its dashes \(--space lr=1e-3,1e-4\); a flag fixed .* goes after --"),
    (["--space", "lr=1e-3", "--hidden_dropout_prob=0.1"], r"^--hidden_dropout_prob=0.1: --space takes FLAG=SPEC items"),
    (["--space", "--pals", "yes,no"], r"^--space --pals: --space takes FLAG=SPEC items.*\(--space pals=SPEC\)"),
    (["--space", " =1e-3,1e-4"], r"^--space ' =1e-3,1e-4': no flag name before '='"),
    (["--space", "lr =1e-3,1e-4"], r"^--space 'lr =1e-3,1e-4': spaces around the flag name before '='"),
    (["--space", "lr=1e-3,"], r"^--space 'lr=1e-3,': an empty choice between commas.*e.g. lr=1e-3$"),
    (["--space", "lr=1e-3, ,1e-4"], r"an empty choice between commas.*e.g. lr=1e-3,1e-4$"),
    (["--space", "lr= "], r"^--space 'lr= ': no choices"),
    # a choice twice (one value in two spellings too): its repeats had each been skipped as a duplicate trial
    (["--space", "lr=1e-3,1e-3"], r"^--space 'lr=1e-3,1e-3': 1e-3 is given twice; give each value once$"),
    (["--space", "lr=1e-3,2e-3,0.001"], r"^--space 'lr=1e-3,2e-3,0.001': 0.001 is given twice"),
    (["--space", "sampler=annealed,all,annealed"], r"annealed is given twice; give each value once$"),
    (["--space", "lr=1e-4,2e-4", "--space", "lr=1e-3"], r"--space names --lr twice"),  # every --space acts
    (["--space", "lr=1e-3", "--trials", "2", "--trials", "3"], r"^sweep.py: --trials given twice \(2, then 3\)"),
])
def test_bad_input_is_one_line_before_anything_trains(tmp_path, monkeypatch, course_data, tiny_model, argv, match):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MinbertError, match=match):
        sweep.main(["classifier", *argv, "--", *sweep_base(course_data, tiny_model)])
    assert not list(tmp_path.glob("runs/sweeps/*/t*"))


@pytest.mark.parametrize("fixed", [["--seed", "3"], ["--seed=3"], ["--run_dir=x"]])
def test_a_flag_the_sweep_sets_is_refused_after_the_dashes_in_either_spelling(tmp_path, monkeypatch, course_data,
                                                                             tiny_model, fixed):
    """Each trial adds its own --seed and run folder: fixed after -- as well, every trial would give it twice."""
    monkeypatch.chdir(tmp_path)
    flag = fixed[0].partition("=")[0]
    with pytest.raises(MinbertError, match=f"^{flag} is set by the sweep for every trial"):
        sweep.main(["classifier", "--space", "lr=1e-3,1e-4", "--", *sweep_base(course_data, tiny_model), *fixed])


def test_unknown_trial_flag_and_missing_dataset(tmp_path, monkeypatch, course_data, tiny_model):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(MinbertError, match="unrecognized arguments: --bogus"):
        sweep.main(["classifier", "--space", "lr=1e-3,1e-4", "--", *sweep_base(course_data, tiny_model), "--bogus"])
    with pytest.raises(MinbertError, match="a classifier sweep scores one dataset"):
        sweep.main(["classifier", "--space", "lr=1e-3,1e-4", "--", "--epochs", "1"])


def test_every_space_flag_given_acts():
    """`--space a=... --space b=...` searches both (argparse alone would search b only)."""
    from minbert.flags.typed import parse_flags
    from minbert.sweeps.space import parse_space
    args = parse_flags(sweep.build_parser(), ["classifier", "--space", "lr=1e-4,1e-3", "--space",
                                              "hidden_dropout_prob=0.1,0.3", "scheduler=constant,linear"])
    assert parse_space(args.space) == {"lr": ("choice", ["1e-4", "1e-3"]),
                                       "hidden_dropout_prob": ("choice", ["0.1", "0.3"]),
                                       "scheduler": ("choice", ["constant", "linear"])}
