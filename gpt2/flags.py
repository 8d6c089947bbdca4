"""The GPT-2 scripts' flags, built from the shared groups (minbert/flags/groups.py), and the settings they become:
the same frozen objects (minbert/specs.py) the BERT pipelines take.

Part 1's flags are the handout's (--fine-tune-mode, --batch_size, --lr, --hidden_dropout_prob, --epochs,
--use_gpu, --seed) with the shared speed, recipe and run-folder groups. The levers that reach into BERT's own
modules (SMART's embedding perturbation, --freeze_layers, --gradual_unfreeze, --llrd) are refused here in one
line rather than half applied."""
from gpt2.config import ConfigError, GPT2Config
from minbert.flags.groups import add_recipe_flags, add_run_flags, add_speed_flags
from minbert.flags.settings import recipe, regularizers, runtime
from minbert.flags.types import positive_float, positive_int, probability, seed
from minbert.hub import resolve_pretrained
from minbert.runs.identity import defining_flags
from minbert.specs import ClassifierSettings, ModelSpec, RunSpec
from utils import MinbertError, Parser

# The handout's rates: the head alone learns fast; the whole model needs a small step.
DEFAULT_LR = {"last-linear-layer": 1e-3, "full-model": 1e-5}
NOT_FOR_GPT2 = {"smart_weight": 0.0, "smart_bregman_weight": 0.0, "freeze_layers": 0, "gradual_unfreeze": 0, "llrd": 1.0}


def _parser(prog, kind, description, modes):
    """The flags both GPT-2 scripts take; `kind` names their run folders, `modes` are the --fine-tune-mode choices
    (the first is the default)."""
    ap = Parser(prog=prog, description=description)
    ap.add_argument("--fine-tune-mode", dest="fine_tune_mode", choices=modes, default=modes[0],
                    help="the head on a frozen GPT-2, or the whole model")
    ap.add_argument("--lr", type=positive_float, default=None,
                    help=", ".join(f"{v:g} for {k}" for k, v in DEFAULT_LR.items() if k in modes) + " by default")
    ap.add_argument("--use_gpu", action="store_true", help="train on the GPU (CUDA, or Apple's MPS)")
    ap.add_argument("--batch_size", type=positive_int, default=8, help="examples per optimizer step")
    ap.add_argument("--hidden_dropout_prob", type=probability, default=0.3, help="dropout before the classifier head")
    ap.add_argument("--epochs", type=positive_int, default=10, help="passes over the training set")
    ap.add_argument("--seed", type=seed, default=11711, help="seeds every random draw: a run is repeatable")
    ap.add_argument("--pretrained", default="gpt2", help="a GPT-2 checkpoint folder in HF's layout")
    ap.add_argument("--data_dir", default="../data", help="the folder of the course CSVs (the project's data/)")
    ap.add_argument("--max_length", type=positive_int, default=512, help="tokens per input, at most the model's positions")
    ap.add_argument("--predictions_dir", default="predictions",
                    help="where the leaderboard files of this run are copied (the run folder keeps its own)")
    add_speed_flags(ap)
    add_recipe_flags(ap, {"rdrop_weight": 0.0, "smart_weight": 0.0})
    add_run_flags(ap, kind, "--checkpoint_dir")
    return ap


def classifier_parser():
    ap = _parser("classifier.py", "gpt2-classifier", "Build GPT-2, Part 1: sentiment on SST and CFIMDB from GPT-2's last token.",
                 ["last-linear-layer", "full-model"])
    ap.add_argument("--datasets", nargs="+", choices=["sst", "cfimdb"], default=["sst", "cfimdb"],
                    help="which datasets to train on, one after the other")
    return ap


def paraphrase_parser():
    ap = _parser("paraphrase_detection.py", "gpt2-paraphrase", "Build GPT-2, Part 2: Quora paraphrase detection as a cloze task (the LM "
                                            "answers yes or no).", ["full-model"])
    ap.set_defaults(datasets=["quora"])
    return ap


def gpt2_config(pretrained):
    try:
        return GPT2Config.from_json_file(resolve_pretrained(pretrained).require("config").config)
    except ConfigError as e:
        raise MinbertError(str(e)) from None


def classifier_settings(args):
    """ClassifierSettings of the parsed flags, for minbert's Part 1 pipeline with GPT-2's (gpt2/sentiment.py)."""
    v = dict(vars(args))
    for flag, off in NOT_FOR_GPT2.items():
        if v.get(flag) not in (None, off):
            raise MinbertError(f"--{flag} {v[flag]}: not available for GPT-2 (it reaches into BERT's own modules)")
    v.update({k: off for k, off in NOT_FOR_GPT2.items()})
    v["lr"] = v["lr"] or DEFAULT_LR[v["fine_tune_mode"]]
    limit = gpt2_config(v["pretrained"]).max_position_embeddings
    if v["max_length"] > limit:
        v["max_length"] = limit  # GPT-2 sees at most its positions; the default asks for the handout's 512
    model = ModelSpec(pipeline=f"gpt2-{'paraphrase' if v['datasets'] == ['quora'] else 'classifier'}", pretrained=v["pretrained"], fine_tune_mode=v["fine_tune_mode"],
                      dropout=[v["hidden_dropout_prob"]], max_length=v["max_length"])
    return ClassifierSettings(model=model, recipe=recipe(v, v["lr"], f"lr {v['lr']:g}"), regularizers=regularizers(v),
                              runtime=runtime(v), run=RunSpec(name=v["run_name"], dir=v["run_dir"], resume=v["resume"],
                                                              backup=v["backup"], flags=defining_flags(v)),
                              datasets=tuple(v["datasets"]), data_dir=v["data_dir"], batch_size=v["batch_size"],
                              bucket=v["bucket"], predictions_dir=v["predictions_dir"])
