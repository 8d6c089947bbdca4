"""Every pipeline's command-line flags, declared once: the three pipeline parsers (classifier.py,
multitask_classifier.py, pretrain.py), built from the shared groups (groups.py). They live here, not in the
scripts, so that sweep.py, tools/ and the generated docs/flags.md read the same declarations the scripts
parse; settings.py turns what they parse into the typed settings the library takes."""
import argparse

from minbert.course_data import TASK_PREFIX, data_file
from minbert.finetuning.modes import FINE_TUNE_MODES
from minbert.flags.defaults import DEFAULT_REGULARIZERS, FULL_MODEL_LR, WIDE, WIDE_LR
from minbert.flags.groups import (add_adapter_flags, add_recipe_flags, add_run_flags, add_speed_flags,
                                  add_tensorboard_flag)
from minbert.flags.types import (fold_spec, fraction, nonneg_float, nonneg_int, positive_float, positive_int,
                                 probability, seed)
from minbert.objectives.embedding import STS_LOSSES
from minbert.specs import MAX_LENGTH
from utils import Parser


def given_flags(parser, argv):
    """The destinations of the flags actually typed in `argv` (not those left at their defaults, nor the ones
    set_defaults fills in: --recipe handout's, the hidden checkpoint_name)."""
    saved, saved_defaults = {a.dest: a.default for a in parser._actions}, parser._defaults
    try:
        for a in parser._actions:
            a.default = argparse.SUPPRESS
        parser._defaults = {}
        return set(vars(parser.parse_args(list(argv))))
    finally:
        parser._defaults = saved_defaults
        for a in parser._actions:
            a.default = saved[a.dest]



# ----------------------------------------------------------------------------- Part 1: classifier.py

def classifier_parser():
    ap = Parser(prog="classifier.py", description="Part 1: fine-tune BERT for sentiment on SST and CFIMDB.")
    ap.add_argument("--fine-tune-mode", dest="fine_tune_mode", choices=FINE_TUNE_MODES,
                    default="last-linear-layer",
                    help="what trains: the head on a frozen BERT (the handout's default), the whole model, "
                         "or adapters on a frozen BERT (LoRA, DoRA, Houlsby's, a prefix: "
                         "minbert/finetuning/)")
    ap.add_argument("--lr", type=positive_float, default=None,
                    help="default 1e-3 for last-linear-layer, lora and dora; for full-model "
                         f"{FULL_MODEL_LR['best']:g} below hidden size {WIDE}, {WIDE_LR:g} from {WIDE} up "
                         f"(--recipe handout: {FULL_MODEL_LR['handout']:g})")
    ap.add_argument("--use_gpu", action="store_true", help="train on the GPU (CUDA, or Apple's MPS)")
    ap.add_argument("--batch_size", type=positive_int, default=8, help="examples per optimizer "
                                                                       "step (all ranks together)")
    ap.add_argument("--hidden_dropout_prob", type=probability, default=0.3, help="dropout before "
                                                                                 "the classifier head")
    ap.add_argument("--epochs", type=positive_int, default=10, help="passes over the training set")
    ap.add_argument("--seed", type=seed, default=11711, help="seeds every random draw: a run is repeatable")
    ap.add_argument("--pretrained", default="bert-base-uncased",
                    help="bert-base-uncased (downloaded once), "
                         "all-minilm-l6-v2 (packaged), or a local folder")
    ap.add_argument("--data_dir", default="data", help="the folder of the course CSVs")
    ap.add_argument("--datasets", nargs="+", choices=["sst", "cfimdb"], default=["sst", "cfimdb"],
                    help="which datasets to train on, one after the other")
    ap.add_argument("--max_length", type=positive_int, default=MAX_LENGTH["classifier"],
                    help="tokens per input, at most the checkpoint's max_position_embeddings")
    add_speed_flags(ap)
    add_adapter_flags(ap)
    add_recipe_flags(ap, DEFAULT_REGULARIZERS["classifier"], full_model_only=True)  # resolved below
    add_run_flags(ap, "classifier", "--checkpoint_dir")
    ap.add_argument("--predictions_dir", default="predictions",
                    help="where the leaderboard files of this run are copied (the run folder keeps its own)")
    return ap


# ---------------------------------------------------------------------------- Part 2: multitask_classifier.py

# The handout's flag prefix of each task: --para_train, --para_dev_out, ... are Quora's.
FLAG_PREFIX = TASK_PREFIX
PAIR_ENCODINGS = ("cross", "siamese", "mixed")
# The flags that shape a multitask model (specs.ModelSpec): --eval_only takes them from the checkpoint.
ARCHITECTURE = ("pretrained", "fine_tune_mode", "lora_rank", "lora_alpha", "lora_targets", "pair_encoding",
                "pooling", "pals", "pals_dim", "siamese_proj", "adapter_dim", "prefix_length", "shared_head")


def multitask_parser():
    ap = Parser(prog="multitask_classifier.py",
                description="Part 2: one BERT for sentiment (SST), paraphrase (Quora) and similarity (STS).")
    for task, prefix in FLAG_PREFIX.items():
        for split in ("train", "dev", "test"):
            ap.add_argument(f"--{prefix}_{split}", default=None, help="default: "
                                                                      f"{data_file('DATA_DIR', task, split)}")
    ap.add_argument("--seed", type=seed, default=11711, help="seeds every random draw: a run is repeatable")
    ap.add_argument("--epochs", type=positive_int, default=10, help="epochs of --steps_per_epoch steps")
    ap.add_argument("--fine-tune-mode", dest="fine_tune_mode", choices=FINE_TUNE_MODES, default="full-model",
                    help="full-model, last-linear-layer (frozen BERT), or adapters on a frozen BERT "
                         "(lora, dora, adapter, prefix: minbert/finetuning/)")
    ap.add_argument("--use_gpu", action="store_true", help="train on the GPU (CUDA, or Apple's MPS)")
    for prefix in FLAG_PREFIX.values():
        for split in ("dev", "test"):
            ap.add_argument(f"--{prefix}_{split}_out", default=f"predictions/{prefix}-{split}-output.csv",
                            help="where this run's file is copied (the run folder keeps its own)")
    ap.add_argument("--batch_size", type=positive_int, default=32, help="examples per step "
                                                                        "(all ranks together)")
    ap.add_argument("--hidden_dropout_prob", type=probability, default=0.1, help="dropout before "
                                                                                 "every task head")
    ap.add_argument("--lr", type=positive_float, default=None,
                    help=f"default {FULL_MODEL_LR['best']:g} below hidden size {WIDE}, {WIDE_LR:g} from "
                         f"{WIDE} up; 1e-3 when only adapters (lora, dora) or PALs and heads train")
    ap.add_argument("--pretrained", default="bert-base-uncased",
                    help="bert-base-uncased (downloaded once), all-minilm-l6-v2 "
                         "(packaged), a hub id, or a local folder")
    ap.add_argument("--data_dir", default="data", help="the folder of the course CSVs (each "
                                                       "--*_train/dev/test overrides one)")
    ap.add_argument("--max_length", type=positive_int, default=MAX_LENGTH["multitask"],
                    help="tokens per input, at most the checkpoint's max_position_embeddings")
    add_speed_flags(ap)
    add_adapter_flags(ap)
    ap.add_argument("--pals", action="store_true",
                    help="projected attention layers per task beside every BERT layer (Stickland & Murray "
                         "2019); the backbone trains with full-model and stays frozen with last-linear-layer")
    ap.add_argument("--pals_dim", type=positive_int, default=None,
                    help="the PALs' width d_s (default: 204 scaled from "
                         "BERT-base to the checkpoint's hidden size)")
    add_recipe_flags(ap, DEFAULT_REGULARIZERS["multitask"])
    ap.add_argument("--pair_encoding", choices=PAIR_ENCODINGS, default="cross",
                    help="cross: '[CLS] a [SEP] b [SEP]'; siamese: two "
                         "sentence embeddings; mixed: Quora cross, STS siamese")
    ap.add_argument("--pooling", choices=["cls", "pooler", "mean"], default="mean",
                    help="the sentence embedding: masked mean of the last "
                         "layer, its [CLS] state, or the pooler output")
    g = ap.add_argument_group("sentence embeddings (minbert/objectives/embedding.py; MNRL, SimCSE and the "
                              "projection need siamese pairs: --pair_encoding siamese or mixed)")
    g.add_argument("--sts_loss", choices=list(STS_LOSSES), default="mse",
                   help="STS objective: MSE on 0-5, cosine regression to score/5, or CoSENT's ranking loss")
    g.add_argument("--mnrl_weight", type=nonneg_float, default=0.0,
                   help="multiple negatives ranking loss on Quora "
                        "duplicates and STS pairs with gold >= 4 (0: off)")
    g.add_argument("--mnrl_scale", type=positive_float, default=20.0, help="MNRL's scale on the cosine")
    g.add_argument("--simcse_weight", type=nonneg_float, default=0.0,
                   help="unsupervised SimCSE on each batch's sentences, temperature 0.05 (0: off)")
    g.add_argument("--siamese_proj", type=nonneg_int, default=0,
                   help="a shared linear projection to this many "
                        "dimensions before cosine and pair features (0: off)")
    ap.add_argument("--sequential", action="store_true", help="train the tasks one after another each epoch")
    ap.add_argument("--sampler", choices=["annealed", "proportional", "round-robin", "all"],
                    default="annealed",
                    help="all: one batch of every task in each optimizer step (losses summed, or PCGrad)")
    ap.add_argument("--pcgrad", action="store_true",
                    help="gradient surgery (Yu et al. 2020) on the per-task gradients; needs --sampler all")
    ap.add_argument("--gradvac", action="store_true",
                    help="Gradient Vaccine (Wang et al. 2021; minbert/objectives/gradvac.py): align each "
                         "pair of task gradients with the similarity they usually have; needs --sampler all")
    ap.add_argument("--gradvac_beta", type=probability, default=1e-2,
                    help="the decay of GradVac's moving average of each "
                         "pair's gradient similarity (the paper's 1e-2)")
    ap.add_argument("--shared_head", type=nonneg_int, default=0, metavar="DIM",
                    help="one hidden layer (DIM units, GELU) shared by the task heads of SST and "
                         "cross-encoded pairs, each task keeping its own output layer (0: separate heads)")
    ap.add_argument("--extra_task", nargs="+", default=[], metavar="NAME=FILE",
                    help="more training data with heads of their own, trained through the same sampler: "
                         "snli, mnli (.jsonl or .txt as released), sick "
                         "(SICK.txt), paws (train.tsv); minbert/tasks/extra.py")
    ap.add_argument("--distill", metavar="SOFT_TARGETS", default=None,
                    help="train on an ensemble's predictions too (Hinton et al. 2015): the soft-targets.npz "
                         "that ensemble.py --soft_targets writes (minbert/objectives/distill.py)")
    ap.add_argument("--fold", type=fold_spec, default=None, metavar="I/K",
                    help="train without fold I of K of every training set (folds by a hash of the example "
                         "id): the teachers of cross-fitted soft targets, one run per fold "
                         "(minbert/objectives/distill.py)")
    ap.add_argument("--distill_weight", type=fraction, default=0.5,
                    help="alpha: the loss is (1 - alpha) gold + alpha distillation")
    ap.add_argument("--distill_temperature", type=positive_float, default=2.0,
                    help="T: teacher and student probabilities are softened by T (the term is scaled by T^2)")
    ap.add_argument("--steps_per_epoch", type=positive_int, default=None,
                    help="joint training steps per epoch (default: "
                         "one pass's worth of batches over all tasks)")
    ap.add_argument("--loss_weights", type=nonneg_float, nargs=3, default=[1.0, 1.0, 1.0],
                    metavar=("SST", "QUORA", "STS"), help="each task's weight in the training loss")
    ap.add_argument("--task_dropout", type=probability, nargs=3, default=None,
                    metavar=("SST", "QUORA", "STS"),
                    help="per-head dropout (default: --hidden_dropout_prob for all three)")
    add_run_flags(ap, "multitask", "--checkpoint")
    ap.add_argument("--eval_only", metavar="CHECKPOINT", help="re-score a saved model "
                                                              "and rewrite the six files")
    ap.add_argument("--results", default="predictions/multitask-results.csv", help="every run "
                                                                                   "appends a row here")
    return ap


# What --eval_only reads of the flags: the model comes from its checkpoint (architecture flags typed must
# agree with it), so every training flag is ignored, and a line says which.
EVAL_ONLY_FLAGS = ({"eval_only", "merge", "amp", "attn", "use_gpu", "max_length", "data_dir", "run_dir",
                    "run_name", "backup", *ARCHITECTURE}
                   | {f"{p}_{s}" for p in FLAG_PREFIX.values()
                      for s in ("dev", "test", "dev_out", "test_out")})


# ----------------------------------------------------------------------------- pretrain.py

def pretrain_parser():
    ap = Parser(prog="pretrain.py", description="Further masked-LM (and next-sentence) "
                                                 "pretraining on the task text.")
    ap.add_argument("--pretrained", default="bert-base-uncased", help="the checkpoint to pretrain further")
    ap.add_argument("--data_dir", default="data", help="the course CSVs whose "
                                                       "training sentences are the text")
    ap.add_argument("--texts", default=None, help="one sentence per line, instead of the task training text "
                                                  "(with --nsp: a blank line between documents)")
    ap.add_argument("--corpus", choices=["tasks", "cfimdb", "sonnets"], default=None,
                    help="the text without --texts: tasks (every training sentence of SST, CFIMDB, Quora "
                         "and STS; the default without --nsp), cfimdb (the training reviews split into "
                         "sentences, each review a document; the default with --nsp) or sonnets "
                         "(DATA_DIR/sonnets.txt's lines, each sonnet a document)")
    ap.add_argument("--nsp", type=nonneg_float, default=0.0,
                    help="the weight of next-sentence prediction's loss beside the masked-LM loss, on pairs "
                         "of spans of consecutive sentences built as BERT's data is (0: off, masked LM on "
                         "single sentences; BERT's is 1)")
    ap.add_argument("--out", required=True, help="the checkpoint folder to write "
                                                 "(loadable with --pretrained OUT)")
    ap.add_argument("--epochs", type=positive_int, default=3, help="passes over the text")
    ap.add_argument("--max_steps", type=nonneg_int, default=0, help="stop after this many "
                                                                    "optimizer steps (0: no limit)")
    ap.add_argument("--lr", type=positive_float, default=5e-5, help="peak learning rate (linear "
                                                                    "warm-up, then decay)")
    ap.add_argument("--batch_size", type=positive_int, default=32,
                    help="sentences (with --nsp: pairs) per step")
    ap.add_argument("--max_length", type=positive_int, default=MAX_LENGTH["pretrain"],
                    help="tokens per sentence (or pair)")
    ap.add_argument("--mask_prob", type=fraction, default=0.15, help="share of tokens chosen for prediction")
    ap.add_argument("--weight_decay", type=nonneg_float, default=0.01, help="AdamW's decoupled weight decay")
    ap.add_argument("--warmup_ratio", type=fraction, default=0.06, help="share of the steps spent warming up")
    ap.add_argument("--seed", type=seed, default=11711, help="seeds every random draw: a run is repeatable")
    ap.add_argument("--use_gpu", action="store_true", help="train on the GPU (CUDA, or Apple's MPS)")
    ap.add_argument("--resume", action="store_true", help="continue the run saved in --out")
    add_tensorboard_flag(ap)
    add_speed_flags(ap)
    # the shared trainer's other levers, at their plain values (not flags of this script)
    ap.set_defaults(scheduler="linear", max_grad_norm=1.0, llrd=1.0, head_lr=None, patience=0,
                    optimizer="adamw", freeze_layers=0, gradual_unfreeze=0)
    return ap
