"""Every flag of the training scripts, one row each (flag.Flag): minBERT's classifier.py,
multitask_classifier.py and pretrain.py, Build GPT-2's classifier.py, paraphrase_detection.py and
sonnet_generation.py, and bench.py, which times their step. A row says the flag's spelling, type, default and
help (a Per where scripts differ), which scripts take it and in which argument group, and, where a
configuration would ignore it, the rule that refuses it. The parsers (`parser`), the rules (`idle_rules`), the
values a script does not take but its settings need (`defaults`), the flags Build GPT-2 leaves out (`absent`)
and docs/flags.md (tools/flag_docs.py) are all built from the rows; the settings take each value by its
destination (settings.from_flags).

A new flag is one row here (or, for a regulariser, in its module's FLAGS) and a field of the same name in the
settings dataclass that carries it. Defaults that are the settings' own (Recipe's, ModelSpec's, each
pipeline's batch size) are read from those dataclasses, so each is written once.
"""
import argparse
from dataclasses import fields

from config import SHAPES
from minbert.course_data import TASK_PREFIX, data_file
from minbert.finetuning.lora import TARGETS
from minbert.flag import Flag, Per
from minbert.finetuning.modes import BENCH_MODES, FINE_TUNE_MODES, GPT2_MODES, modes_help
from minbert.flags import types
from minbert.flags.defaults import DEFAULT_REGULARIZERS, HANDOUT_DROPOUT, PRETRAIN_RECIPE, lr_help
from minbert.flags.groups import BACKUP_HELP, RunFolder
from minbert.flags.rules import (ADAPTERS_ONLY, BEAM, DISTILL, FOREACH, FREEZING, FUSED, NO_HEAD, RECORD_STEP,
                                 SAMPLING, not_frozen_head, shaping_rule)
from minbert.objectives.sentence_losses import STS_LOSSES
from minbert.objectives.regularizers import REGULARIZERS
from minbert.precision import AMP_CHOICES
from minbert.specs import (GPT2_DATA, MAX_LENGTH, BenchSettings, ClassifierSettings, ModelSpec, MultitaskData,
                           MultitaskSettings, PretrainSettings, Recipe, RunSpec, Runtime, SonnetSettings, TaskLosses)
from minbert.tasks.extra import EXTRA_HELP
from minbert.training.schedule import SCHEDULES
from optimizer import OPTIMIZERS

P1, P2, PRE, BENCH, ENSEMBLE = "classifier", "multitask", "pretrain", "bench", "ensemble"
G1, GP, GS = "gpt2-classifier", "gpt2-paraphrase", "gpt2-sonnet"
GPT2 = frozenset({G1, GP, GS})
BERT = frozenset({P1, P2})           # minBERT's fine-tuning pipelines
TRAINING = BERT | GPT2
ALL = TRAINING | {PRE, BENCH}
INFERENCE = frozenset({ENSEMBLE})  # ensemble.py: the speed flags that act where nothing trains

SPEED, ADAPTERS, RECIPE, RUN = ("speed", "adapters (--fine-tune-mode lora, dora, adapter or prefix)",
                                "training recipe", "run folder")
EMBEDDINGS = ("sentence embeddings (minbert/objectives/sentence_losses.py; MNRL, SimCSE and the projection need "
              "siamese pairs: --pair_encoding siamese or mixed)")
BENCH_REGULARIZERS = "regularisers, as the pipelines take them (default: Part 2's default recipe)"
NOT_GPT2 = "not available for GPT-2; drop it"
RUN_NAME_HELP = "the run's folder under runs/ (default: {}-TIMESTAMP); an existing one is refused unless --resume"
# Build GPT-2's scripts start from GPT-2's checkpoint (and run from gpt2/, beside data/: specs.GPT2_DATA).
GPT2_PRETRAINED = "gpt2"


def default(cls, name):
    """A settings dataclass's default for `name`: the one place it is written."""
    return next(f.default for f in fields(cls) if f.name == name)


# ----------------------------------------------------------------------------- the rows

PAIR_ENCODINGS = ("cross", "siamese", "mixed")


def _rows():
    F = Flag
    rows = [
        # --- what is trained, on what
        F("fine_tune_mode", Per("full-model", classifier="last-linear-layer", gpt2_classifier="last-linear-layer"),
          Per(tuple(FINE_TUNE_MODES), gpt2_classifier=GPT2_MODES, gpt2_paraphrase=("full-model",),
              bench=BENCH_MODES),
          Per(f"what trains: {modes_help(FINE_TUNE_MODES)} (minbert/finetuning/)",
              gpt2_classifier=f"what trains: {modes_help(GPT2_MODES, 'GPT-2')}",
              gpt2_paraphrase=f"what trains: {modes_help(['full-model'])}",
              bench=f"what trains: {modes_help(BENCH_MODES)}; adapters on query and value, as the pipelines' "
                    "default"),
          scripts=BERT | {G1, GP, BENCH}),
        F("pretrained", Per(default(ModelSpec, "pretrained"), gpt2_classifier=GPT2_PRETRAINED,
                            gpt2_paraphrase=GPT2_PRETRAINED, gpt2_sonnet=GPT2_PRETRAINED, bench=None), None,
          Per("bert-base-uncased (downloaded once), all-minilm-l6-v2 (packaged), a hub id, or a local folder",
              pretrain="the checkpoint to pretrain further",
              gpt2_classifier="gpt2, gpt2-medium, gpt2-large, gpt2-xl (downloaded once) or a checkpoint folder "
                              "in HF's layout", gpt2_paraphrase=..., gpt2_sonnet=...,
              bench="a checkpoint (default: random weights of --config)"), scripts=ALL),
        F("lr", Per(None, pretrain=PRETRAIN_RECIPE["lr"]), "positive_float",
          Per(lr_help(GPT2_MODES, gpt2=True), classifier=lr_help(FINE_TUNE_MODES), multitask=...,
              pretrain="peak learning rate (linear warm-up, then decay)", gpt2_paraphrase=lr_help((), gpt2=True),
              gpt2_sonnet=...), scripts=TRAINING | {PRE}),
        F("use_gpu", False, "switch", Per("train on the GPU (CUDA, or Apple's MPS)", bench="time the GPU"),
          scripts=ALL),
        F("batch_size", Per(default(ClassifierSettings, "batch_size"), multitask=default(MultitaskData, "batch_size"),
                            pretrain=default(PretrainSettings, "batch_size"),
                            bench=default(BenchSettings, "batch_size")), "positive_int",
          Per("examples per optimizer step", classifier="examples per optimizer step (all ranks together)",
              multitask="examples per step (all ranks together)", pretrain="sentences (with --nsp: pairs) per step",
              gpt2_sonnet="sonnets per optimizer step", bench="examples per step"), scripts=ALL),
        # Part 1's head dropout is the handout's; Part 2's heads each take ModelSpec's
        F("hidden_dropout_prob", Per(HANDOUT_DROPOUT, multitask=ModelSpec().dropout[0]), "probability",
          Per("dropout before the classifier head", multitask="dropout before every task head"),
          scripts=BERT | {G1, GP},
          idle=Per(None, multitask=(lambda flags, typed: "task_dropout" not in typed,
                                    "is every head's dropout, which --task_dropout replaces with one per head"),
                   gpt2_paraphrase=(lambda flags, typed: False, "is the dropout before a classifier head, which the "
                                                        "cloze task does not have (it answers with the LM head)"))),
        F("epochs", Per(default(Recipe, "epochs"), pretrain=PRETRAIN_RECIPE["epochs"]), "positive_int",
          Per("passes over the training set", multitask="epochs of --steps_per_epoch steps",
              pretrain="passes over the text"), scripts=TRAINING | {PRE}),
        F("seed", default(Recipe, "seed"), "seed", "seeds every random draw: a run is repeatable",
          scripts=TRAINING | {PRE}),
        F("data_dir", Per(default(ClassifierSettings, "data_dir"), gpt2_classifier=GPT2_DATA,
                          gpt2_paraphrase=GPT2_DATA), None,
          Per("the folder of the course CSVs",
              multitask="the folder of the course CSVs (each --*_train/dev/test overrides one)",
              pretrain="the course CSVs whose training sentences are the text",
              gpt2_classifier="the folder of the course CSVs (the project's data/)", gpt2_paraphrase=...),
          scripts=BERT | {PRE, G1, GP, BENCH},
          idle=Per(None, pretrain=(lambda flags, typed: flags["texts"] is None,
                                   "is where the course CSVs' training sentences are read, which --texts replaces "
                                   "as the text"),
                   bench=(lambda flags, typed: flags["data"] != "synthetic",
                          "is the folder of the course CSVs, which --data synthetic does not read (random token "
                          "ids)"))),
        F("datasets", Per(list(default(ClassifierSettings, "datasets")), gpt2_paraphrase=["quora"]), ("sst", "cfimdb"),
          "which datasets to train on, one after the other", nargs="+", scripts=frozenset({P1, G1}), implied={GP}),
        F("max_length", Per(None, **{k.replace("-", "_"): v for k, v in MAX_LENGTH.items()}), "positive_int",
          Per("tokens per input, at most the checkpoint's max_position_embeddings",
              pretrain="tokens per sentence (or pair)", gpt2_classifier="tokens per input, at most the model's "
                                                                        "positions",
              gpt2_paraphrase=..., gpt2_sonnet=...), scripts=TRAINING | {PRE}),
        # --- Part 2's data files and outputs
        *[F(f"{prefix}_{split}", None, None, f"default: {data_file('DATA_DIR', task, split)}",
            scripts=frozenset({P2})) for task, prefix in TASK_PREFIX.items() for split in ("train", "dev", "test")],
        *[F(f"{prefix}_{split}_out", Per(f"predictions/{prefix}-{split}-output.csv", gpt2_paraphrase=None), None,
            Per("where this run's file is copied (the run folder keeps its own)",
                gpt2_paraphrase=f"where this run's {split} predictions are copied (default: "
                                f"PREDICTIONS_DIR/para-{split}-output.csv; the run folder keeps its own)"),
            scripts=frozenset({P2, GP}) if prefix == "para" else frozenset({P2}))
          for prefix in TASK_PREFIX.values() for split in ("dev", "test")],
        F("predictions_dir", default(ClassifierSettings, "predictions_dir"), None,
          "where the leaderboard files of this run are copied (the run folder keeps its own)",
          scripts=frozenset({P1, G1, GP}),
          idle=Per(None, gpt2_paraphrase=(lambda flags, typed: (flags["para_dev_out"] is None
                                                                or flags["para_test_out"] is None),
                                          "is where the two files go that --para_dev_out and --para_test_out "
                                          "both name already"))),
        F("results", default(MultitaskSettings, "results"), None, "every run appends a row here",
          scripts=frozenset({P2})),
        F("eval_only", default(MultitaskSettings, "eval_only"), None,
          "re-score a saved model and rewrite the six files", metavar="CHECKPOINT", scripts=frozenset({P2})),
        # --- Part 2's model and training
        F("pals", default(ModelSpec, "pals"), "switch",
          Per("projected attention layers per task beside every BERT layer (Stickland & Murray 2019); the backbone "
              "trains with full-model and stays frozen with last-linear-layer",
              bench="with one task's PALs beside every layer"), scripts=frozenset({P2, BENCH})),
        F("pals_dim", default(ModelSpec, "pals_dim"), "positive_int",
          "the PALs' width d_s (default: 204 scaled from BERT-base to the checkpoint's hidden size)",
          scripts=frozenset({P2}),
          idle=(lambda flags, typed: flags["pals"], "is the width of the PALs, which only --pals adds")),
        F("pair_encoding", default(ModelSpec, "pair_encoding"), PAIR_ENCODINGS,
          "cross: '[CLS] a [SEP] b [SEP]'; siamese: two sentence embeddings; mixed: Quora cross, STS siamese",
          scripts=frozenset({P2})),
        F("pooling", default(ModelSpec, "pooling"), ("cls", "pooler", "mean"),
          "the sentence embedding: masked mean of the last layer, its [CLS] state, or the pooler output",
          scripts=frozenset({P2})),
        F("sts_loss", default(TaskLosses, "sts_loss"), tuple(STS_LOSSES),
          "STS objective: MSE on 0-5, cosine regression to score/5, or CoSENT's ranking loss",
          scripts=frozenset({P2}), group=EMBEDDINGS),
        F("mnrl_weight", default(TaskLosses, "mnrl_weight"), "nonneg_float",
          "multiple negatives ranking loss on Quora duplicates and STS pairs with gold >= 4 (0: off)",
          scripts=frozenset({P2}), group=EMBEDDINGS),
        F("mnrl_scale", default(TaskLosses, "mnrl_scale"), "positive_float", "MNRL's scale on the cosine",
          scripts=frozenset({P2}), group=EMBEDDINGS,
          idle=(lambda flags, typed: flags["mnrl_weight"] > 0,
                "scales the MNRL loss, which is off without --mnrl_weight above 0")),
        F("simcse_weight", default(TaskLosses, "simcse_weight"), "nonneg_float",
          "unsupervised SimCSE on each batch's sentences, temperature 0.05 (0: off)", scripts=frozenset({P2}),
          group=EMBEDDINGS),
        F("siamese_proj", default(ModelSpec, "siamese_proj"), "nonneg_int",
          "a shared linear projection to this many dimensions before cosine and pair features (0: off)",
          scripts=frozenset({P2}), group=EMBEDDINGS),
        F("sequential", False, "switch", "train the tasks one after another each epoch", scripts=frozenset({P2})),
        F("sampler", default(MultitaskData, "sampler"), ("annealed", "proportional", "round-robin", "all"),
          "all: one batch of every task in each optimizer step (losses summed, or PCGrad)", scripts=frozenset({P2}),
          idle=(lambda flags, typed: not flags["sequential"],
                "picks each step's task, which --sequential does not do")),
        F("pcgrad", False, "switch", "gradient surgery (Yu et al. 2020) on the per-task gradients; needs "
                                     "--sampler all", scripts=frozenset({P2})),
        F("gradvac", False, "switch", "Gradient Vaccine (Wang et al. 2021; minbert/objectives/gradvac.py): align "
                                      "each pair of task gradients with the similarity they usually have; needs "
                                      "--sampler all", scripts=frozenset({P2})),
        F("gradvac_beta", default(Recipe, "gradvac_beta"), "probability",
          "the decay of GradVac's moving average of each pair's gradient similarity (the paper's 1e-2)",
          scripts=frozenset({P2}),
          idle=(lambda flags, typed: flags["gradvac"],
                "is GradVac's moving-average decay, which is off without --gradvac")),
        F("shared_head", default(ModelSpec, "shared_head"), "nonneg_int",
          "one hidden layer (DIM units, GELU) shared by the task heads of SST and cross-encoded pairs, each task "
          "keeping its own output layer (0: separate heads)", metavar="DIM", scripts=frozenset({P2})),
        F("extra_task", [], None,
          f"more training data with heads of their own, trained through the same sampler: {EXTRA_HELP}; "
          "minbert/tasks/extra.py", nargs="+", metavar="NAME=FILE", scripts=frozenset({P2})),
        F("distill", default(MultitaskData, "distill"), None,
          "train on an ensemble's predictions too (Hinton et al. 2015): the soft-targets.npz that ensemble.py "
          "--soft_targets writes (minbert/objectives/distill.py)", metavar="SOFT_TARGETS", scripts=frozenset({P2})),
        F("fold", default(MultitaskData, "fold"), "fold_spec",
          "train without fold I of K of every training set (folds by a hash of the example id): the teachers of "
          "cross-fitted soft targets, one run per fold (minbert/objectives/distill.py)", metavar="I/K",
          scripts=frozenset({P2})),
        F("distill_weight", default(TaskLosses, "distill_weight"), "fraction",
          "alpha: the loss is (1 - alpha) gold + alpha distillation", scripts=frozenset({P2}), idle=DISTILL),
        F("distill_temperature", default(TaskLosses, "distill_temperature"), "positive_float",
          "T: teacher and student probabilities are softened by T (the term is scaled by T^2)",
          scripts=frozenset({P2}), idle=DISTILL),
        F("steps_per_epoch", default(MultitaskData, "steps_per_epoch"), "epoch_steps",
          "joint training steps per epoch (default: one pass's worth of batches over all tasks)",
          scripts=frozenset({P2})),
        F("loss_weights", list(TaskLosses().weights.values()), "nonneg_float",
          "each task's weight in the training loss", nargs=3, metavar=("SST", "QUORA", "STS"),
          scripts=frozenset({P2})),
        F("task_dropout", None, "probability", "per-head dropout (default: --hidden_dropout_prob for all three)",
          nargs=3, metavar=("SST", "QUORA", "STS"), scripts=frozenset({P2})),
        # --- pretrain.py
        F("texts", default(PretrainSettings, "texts"), None,
          "one sentence per line, instead of the task training text (with --nsp: a blank line between "
          "documents)", scripts=frozenset({PRE})),
        F("corpus", None, ("tasks", "cfimdb", "sonnets"),
          "the text without --texts: tasks (every training sentence of SST, CFIMDB, Quora and STS; the default "
          "without --nsp), cfimdb (the training reviews split into sentences, each review a document; the "
          "default with --nsp) or sonnets (DATA_DIR/sonnets.txt's lines, each sonnet a document)",
          scripts=frozenset({PRE}),
          idle=(lambda flags, typed: flags["texts"] is None, "picks the text, which --texts replaces")),
        F("nsp", default(PretrainSettings, "nsp"), "nonneg_float",
          "the weight of next-sentence prediction's loss beside the masked-LM loss, on pairs of spans of "
          "consecutive sentences built as BERT's data is (0: off, masked LM on single sentences; BERT's is 1)",
          scripts=frozenset({PRE})),
        F("out", None, None, "the checkpoint folder to write (loadable with --pretrained OUT)",
          scripts=frozenset({PRE})),
        F("max_steps", default(PretrainSettings, "max_steps"), "nonneg_int",
          "stop after this many optimizer steps (0: no limit)", scripts=frozenset({PRE})),
        F("mask_prob", default(PretrainSettings, "mask_prob"), "fraction", "share of tokens chosen for prediction",
          scripts=frozenset({PRE})),
        # --- Build GPT-2's sonnets
        F("sonnet_path", default(SonnetSettings, "sonnet_path"), None, "the training sonnets",
          scripts=frozenset({GS})),
        F("held_out_sonnet_path", default(SonnetSettings, "held_out_sonnet_path"), None,
          "the test sonnets' first lines, to complete", scripts=frozenset({GS})),
        F("held_out_dev_path", default(SonnetSettings, "held_out_dev_path"), None,
          "the dev sonnets' first lines, to complete and score", scripts=frozenset({GS})),
        F("true_dev_path", default(SonnetSettings, "true_dev_path"), None,
          "the whole dev sonnets: chrF's references and the perplexity's text", scripts=frozenset({GS})),
        F("sonnet_out", default(SonnetSettings, "sonnet_out"), None, "where the completions are copied",
          scripts=frozenset({GS})),
        F("decoding", default(SonnetSettings, "decoding"), ("sample", "greedy", "beam"),
          "how completions are written: sample (temperature and top-p), greedy, or beam (beam search, the best of "
          "--num_beams hypotheses)", scripts=frozenset({GS})),
        F("temperature", default(SonnetSettings, "temperature"), "positive_float", "sampling temperature",
          scripts=frozenset({GS}), idle=SAMPLING),
        F("top_p", default(SonnetSettings, "top_p"), "share", "nucleus sampling's p (1: no cut)",
          scripts=frozenset({GS}), idle=SAMPLING),
        F("num_beams", default(SonnetSettings, "num_beams"), "positive_int", "beam search's beams (1: greedy)",
          scripts=frozenset({GS}), idle=BEAM),
        F("length_penalty", default(SonnetSettings, "length_penalty"), "length_penalty",
          "a finished hypothesis' score is its log-probability over its length to this power (above 0 favours "
          "longer ones, below 0 shorter)", scripts=frozenset({GS}), idle=BEAM),
        F("no_repeat_ngram_size", default(SonnetSettings, "no_repeat_ngram_size"), "nonneg_int",
          "beam search never repeats an n-gram of this many tokens (0: off)", scripts=frozenset({GS}), idle=BEAM),
        F("early_stopping", default(SonnetSettings, "early_stopping"), "early_stopping",
          "when beam search ends, as HF's generate(early_stopping=...): false (HF's default) once no unfinished "
          "hypothesis could beat the --num_beams finished ones, true as soon as that many have finished, never: "
          "as false, scoring an unfinished one at its longest length", metavar="{false,true,never}",
          scripts=frozenset({GS}), idle=BEAM),
        F("max_line_tokens", default(SonnetSettings, "max_line_tokens"), "positive_int",
          "a line ends here if no newline came", scripts=frozenset({GS})),
        # --- bench.py's own
        F("config", default(BenchSettings, "config"), tuple(sorted(SHAPES)),
          "the shape of the random model when no --pretrained is given", scripts=frozenset({BENCH}),
          idle=(lambda flags, typed: flags["pretrained"] is None,
                "is the shape of the random model, which --pretrained replaces with the checkpoint's")),
        F("data", default(BenchSettings, "data"), ("sst", "quora", "synthetic"),
          "real training batches of a task, or random token ids of --seq_len", scripts=frozenset({BENCH})),
        F("seq_len", default(BenchSettings, "seq_len"), "positive_int",
          "max_length (real data) or the length (synthetic)", scripts=frozenset({BENCH})),
        F("steps", default(BenchSettings, "steps"), "bench_steps", "timed batches per pass",
          scripts=frozenset({BENCH})),
        F("warmup", default(BenchSettings, "warmup"), "bench_warmup", "untimed batches first",
          scripts=frozenset({BENCH})),
        F("repeats", default(BenchSettings, "repeats"), "positive_int",
          "timed passes over the batches; the median counts", scripts=frozenset({BENCH})),
        F("threads", None, "positive_int",
          "torch CPU threads for the model and the peak alike (default: torch's choice)", scripts=frozenset({BENCH})),
        F("peak_repeats", default(BenchSettings, "peak_repeats"), "positive_int",
          "timed matmuls per size for the peak", scripts=frozenset({BENCH})),
        F("compare", default(BenchSettings, "compare"), "switch", "also run with every switch off and print ratios",
          scripts=frozenset({BENCH})),
        F("hf", default(BenchSettings, "hf"), ("all", "best"),
          "also time HF transformers' BertModel on the same weights (needs transformers installed): every row "
          "below, or with `--hf best` only its best setting (on a GPU hf-compiled, else hf-amp in a reduced "
          "precision, else hf-bucketed)", nargs="?", const="all", scripts=frozenset({BENCH})),
        F("profile", default(BenchSettings, "profile"), "nonneg_int",
          "also profile this many plain training steps (with --hf and a reduced precision, HF's too): the time by "
          "phase and by kind of operator; and the plain step's floor, its matrix products and optimizer step alone "
          "(minbert/bench/matmul_floor.py)", metavar="STEPS", scripts=frozenset({BENCH})),
        F("json", None, None, "write the results here", scripts=frozenset({BENCH})),
        # --- speed
        F("amp", "auto", AMP_CHOICES,
          Per("mixed precision. auto (default): bf16 where the hardware runs it natively (recent GPUs, CPUs with "
              "AMX or AVX512-BF16), fp16 with a grad scaler on older GPUs, fp32 otherwise",
              bench="auto: bf16/fp16 only where the hardware runs it natively, else fp32"),
          scripts=ALL | INFERENCE, group=Per(SPEED, bench=None)),
        F("attn", default(Runtime, "attn"), ("sdpa", "explicit"),
          Per("attention path", bench="attention path of the fast runs"), scripts=ALL | INFERENCE,
          group=Per(SPEED, bench=None)),
        F("pad_multiple", None, "nonneg_int",
          Per("pad each batch to a multiple of N tokens, so that a few fixed shapes recur (default: 16 on a GPU, 0 = "
              "to the batch's longest row on the CPU, where padding costs compute)",
              bench="pad bucketed batches to a multiple of N tokens, as the pipelines do (default: 16 on a GPU, 0 "
                    "on the CPU)"), metavar="N", scripts=ALL | INFERENCE, group=Per(SPEED, bench=None)),
        F("bucket", default(ClassifierSettings, "bucket"), "off",
          "batch in plain shuffled order (default: length-bucketed batches)", scripts=TRAINING | {PRE}, group=SPEED),
        F("foreach", default(Recipe, "foreach"), "off",
          "AdamW's reference loop, Algorithm 1 line by line one tensor at a time (default: one fused pass over "
          "each tensor)", scripts=TRAINING | {PRE}, group=SPEED, idle=Per(FOREACH, pretrain=None)),
        F("fused", default(Recipe, "fused"), "off",
          Per("AdamW as one multi-tensor kernel per line of Algorithm 1 instead of one fused pass over each tensor "
              "(the same arithmetic)",
              bench="AdamW's multi-tensor kernels in the fast runs instead of its fused pass"),
          scripts=ALL, group=Per(SPEED, bench=None), idle=Per(FUSED, pretrain=None, bench=None)),
        F("fast_dropout", default(Runtime, "fast_dropout"), "off",
          "torch's dropout, one random draw per element (default: masks drawn in bulk on the CPU, "
          "minbert/dropout.py; a GPU always uses torch's)",
          scripts=BERT | {PRE}, group=SPEED,
          not_gpt2="switches off minBERT's bulk dropout masks, which GPT-2 does not use (its dropout is torch's)"),
        F("compile", default(Runtime, "compile"), "switch",
          Per("torch.compile the model (Inductor's fused kernels); on a GPU inside the recorded step, AdamW's "
              "update compiled too: fastest for long runs, after about 100 s of compiling",
              bench="torch.compile the model in the fast runs"), scripts=ALL, group=Per(SPEED, bench=None),
          idle=Per(None, classifier=not_frozen_head("compiles BERT's forward, which --fine-tune-mode "
                                                     "last-linear-layer runs once to cache its features"),
                   gpt2_classifier=not_frozen_head("compiles GPT-2's forward, which --fine-tune-mode "
                                                    "last-linear-layer runs once to cache its features"))),
        F("record_step", True, "off",
          Per("with --use_gpu, run the training step eagerly, kernel by kernel (default on a GPU: the whole step, "
              "forward to optimizer, recorded once per batch shape as a CUDA graph and replayed, 3-7x faster on "
              "an H100; minbert/training/recorded.py)",
              bench="with --use_gpu, time our steps eagerly only (default: recorded as CUDA graphs, as the "
                    "pipelines run them on a GPU, with the eager step beside them)"),
          scripts=ALL, group=Per(SPEED, bench=None), idle=RECORD_STEP),
        F("grad_accum", default(Recipe, "grad_accum"), "positive_int", "accumulate gradients over this many batches",
          scripts=TRAINING | {PRE}, group=SPEED),
        # --- adapters
        F("lora_rank", default(ModelSpec, "lora_rank"), "positive_int",
          Per("r: the adapters' rank, at most the hidden size (the rank B A can have)",
              bench="the adapters' rank (lora, dora)"),
          scripts=BERT | {G1, BENCH}, group=Per(ADAPTERS, bench=None), idle=Per(None, classifier=ADAPTERS_ONLY,
                                                                                 multitask=ADAPTERS_ONLY,
                                                                                 bench=ADAPTERS_ONLY), implied={GP}),
        F("lora_alpha", default(ModelSpec, "lora_alpha"), "lora_scale", "the update is scaled by alpha / r",
          scripts=BERT | {G1}, group=ADAPTERS, idle=Per(None, classifier=ADAPTERS_ONLY, multitask=ADAPTERS_ONLY),
          implied={GP}),
        F("lora_dropout", default(ModelSpec, "lora_dropout"), "probability", "dropout on the adapters' input",
          scripts=BERT | {G1}, group=ADAPTERS, idle=Per(None, classifier=ADAPTERS_ONLY, multitask=ADAPTERS_ONLY),
          implied={GP}),
        F("lora_targets", list(ModelSpec().lora_targets), types.names_among(TARGETS),
          f"the linears of every layer that get adapters: any of {','.join(TARGETS)} (default "
          f"{','.join(ModelSpec().lora_targets)})", scripts=BERT | {G1}, group=ADAPTERS,
          idle=Per(None, classifier=ADAPTERS_ONLY, multitask=ADAPTERS_ONLY), implied={GP}),
        F("adapter_dim", default(ModelSpec, "adapter_dim"), "positive_int",
          "--fine-tune-mode adapter: the width m of the Houlsby bottleneck adapters (minbert/finetuning/houlsby.py)",
          scripts=BERT | {G1}, group=ADAPTERS,
          idle=Per(None, classifier=(lambda flags, typed: flags["fine_tune_mode"] == "adapter",
                                     "sets the width of --fine-tune-mode adapter's adapters"), multitask=...),
          implied={GP}),
        F("prefix_length", default(ModelSpec, "prefix_length"), "positive_int",
          "--fine-tune-mode prefix: the number of trainable keys and values in every layer "
          "(minbert/finetuning/prefix.py)", scripts=BERT | {G1}, group=ADAPTERS,
          idle=Per(None, classifier=(lambda flags, typed: flags["fine_tune_mode"] == "prefix",
                                     "sets the length of --fine-tune-mode prefix's prefix"), multitask=...),
          implied={GP}),
        F("merge", default(ClassifierSettings, "merge"), "switch",
          Per("fold LoRA/DoRA adapters into the weights (a prefix: drop its MLP) before the final predictions, "
              "so inference costs what the plain model does",
              multitask="fold LoRA/DoRA adapters into the weights (a prefix: drop its MLP) before the final "
                        "predictions (and in --eval_only), so inference costs what the plain model does"),
          scripts=BERT | {G1}, group=ADAPTERS,
          implied={GP}),
        # --- the training recipe
        F("recipe", "best", ("best", "handout"),
          "defaults: best (the recipe measured best, see RESULTS.md) or handout (its plain values: constant lr, no "
          "warm-up or clipping, its lr, batch size, dropout and fine-tune mode); flags given explicitly win either "
          "way", scripts=TRAINING, group=RECIPE),
        F("scheduler", default(Recipe, "scheduler"), SCHEDULES,
          "learning rate after warm-up: constant (the handout), linear or cosine decay to 0", scripts=TRAINING,
          group=RECIPE, implied={PRE}),
        F("warmup_ratio", Per(default(Recipe, "warmup_ratio"), pretrain=PRETRAIN_RECIPE["warmup_ratio"]), "fraction",
          Per("share of all optimizer steps spent warming up", pretrain="share of the steps spent warming up"),
          scripts=TRAINING | {PRE}, group=Per(RECIPE, pretrain=None)),
        F("max_grad_norm", Per(default(Recipe, "max_grad_norm"), pretrain=PRETRAIN_RECIPE["max_grad_norm"]),
          "nonneg_float", "clip the global gradient norm (0: off)", scripts=TRAINING, group=RECIPE, implied={PRE}),
        F("patience", default(Recipe, "patience"), "nonneg_int",
          "stop after this many epochs without a better dev score (0: never)", scripts=TRAINING, group=RECIPE,
          implied={PRE}),
        F("llrd", default(Recipe, "llrd"), "llrd_factor",
          "layer-wise lr decay: layer l of L trains at lr * GAMMA^(L-1-l), embeddings at GAMMA^L", scripts=BERT,
          group=RECIPE, not_gpt2="(layer-wise rates as measured for BERT)",
          idle=not_frozen_head("scales the learning rates of BERT's layers, which --fine-tune-mode "
                                "last-linear-layer freezes"), implied={PRE}),
        F("head_lr", default(Recipe, "head_lr"), "positive_float", "task heads' learning rate (default --lr)",
          scripts=TRAINING, group=RECIPE, idle=Per(None, gpt2_paraphrase=(lambda flags, typed: False, NO_HEAD),
                                                   gpt2_sonnet=(lambda flags, typed: False, NO_HEAD)), implied={PRE}),
        F("weight_decay", Per(default(Recipe, "weight_decay"), pretrain=PRETRAIN_RECIPE["weight_decay"]),
          "nonneg_float", Per("the optimizer's decoupled weight decay", pretrain="AdamW's decoupled weight decay"),
          scripts=TRAINING | {PRE}, group=Per(RECIPE, pretrain=None)),
        F("label_smoothing", default(Recipe, "label_smoothing"), "probability",
          "epsilon of label smoothing (Szegedy et al. 2016): each classification loss's target puts 1 - epsilon on "
          "the gold class and epsilon spread evenly over all K classes (0: the one-hot labels; "
          "minbert/objectives/rows.py)", scripts=BERT | {G1, GP}, group=RECIPE),
        F("optimizer", default(Recipe, "optimizer"), tuple(OPTIMIZERS),
          "adamw (the handout's), lion (Chen et al. 2023; default lr a third of AdamW's) or lamb (You et al. 2020; "
          "default lr five times AdamW's): optimizer.py", scripts=TRAINING, group=RECIPE, implied={PRE}),
        F("freeze_layers", default(Recipe, "freeze_layers"), "nonneg_int",
          "keep the embeddings and the K lowest BERT layers frozen for the whole run (0: none; "
          "minbert/finetuning/freezing.py)", scripts=BERT, group=RECIPE,
          not_gpt2="(freezing runs BERT's lower layers without a graph)", idle=FREEZING, implied={PRE}),
        F("gradual_unfreeze", default(Recipe, "gradual_unfreeze"), "nonneg_int",
          "gradual unfreezing (Howard and Ruder 2018): start with BERT frozen, then unfreeze one more layer from "
          "the top every STEPS optimizer steps, the embeddings last (0: off; minbert/finetuning/freezing.py)",
          metavar="STEPS", scripts=BERT, group=RECIPE,
          not_gpt2="(freezing runs BERT's lower layers without a graph)", idle=FREEZING, implied={PRE}),
        *_regularizer_rows(),
        # --- the run folder
        F("run_name", default(RunSpec, "name"), None,
          Per(RUN_NAME_HELP.format(P2), **{k.replace("-", "_"): RUN_NAME_HELP.format(k) for k in (P1, G1, GP, GS)}),
          scripts=TRAINING, group=RUN, action=RunFolder),
        F("run_dir", default(RunSpec, "dir"), None,
          "the run's folder anywhere (instead of runs/RUN_NAME): checkpoints, log and predictions",
          scripts=TRAINING, group=RUN, action=RunFolder),
        F("resume", default(RunSpec, "resume"), "switch",
          Per("continue from the last completed epoch (of --run_name / --run_dir, else the newest run)",
              pretrain="continue the run saved in --out"), scripts=TRAINING | {PRE}, group=Per(RUN, pretrain=None)),
        F("backup", default(RunSpec, "backup"), "switch", BACKUP_HELP, scripts=TRAINING, group=RUN),
        F("tensorboard", default(Runtime, "tensorboard"), "off",
          "write no TensorBoard event files into the run folder (default: written, minbert/training/monitor.py)",
          scripts=TRAINING | {PRE}, group=Per(RUN, pretrain=None)),
        # the earlier spellings of the run folder, hidden from --help
        F("run_dir", None, None, argparse.SUPPRESS, name="--checkpoint_dir", scripts=frozenset({P1, *GPT2}),
          group=RUN, action=RunFolder),
        F("run_dir", None, None, argparse.SUPPRESS, name="--checkpoint", scripts=frozenset({P2}), group=RUN,
          action=RunFolder),
    ]
    return [_filled(r) for r in rows]


def _filled(row):
    """A row whose Per texts say `...` (the same as the entry before) filled in."""
    def fill(value):
        if not isinstance(value, Per):
            return value
        out, last = Per(value.other), value.other
        for k, v in value.items():
            last = last if v is ... else v
            out[k] = last
        return out
    return Flag(**{f.name: fill(getattr(row, f.name)) for f in fields(Flag)})


def _regularizer_rows():
    """Every regulariser's flags (objectives/regularizers.py REGULARIZERS: one row each, the weight first), in
    the training scripts and bench.py; Build GPT-2's take those whose row has no `gpt2` reason."""
    rows = []
    for r in REGULARIZERS.values():
        scripts = (TRAINING if not r.gpt2 else BERT) | {BENCH}
        for f in r.flags:
            weight = f is r.flags[0]
            if weight:
                p1, p2 = (DEFAULT_REGULARIZERS[p].get(f.dest, f.default) for p in (P1, P2))
                fill = (f"{p1:g} for full-model, 0 otherwise" if p1 else "0")
                help_ = Per(f"{f.help} (0: off; default {f.default:g})", classifier=f"{f.help} (0: off; default "
                                                                                    f"{fill})",
                            multitask=f"{f.help} (0: off; default {p2:g})", bench=...)
                # Part 1's weights are resolved once the fine-tune mode is known (settings.py): None until then
                row = Flag(f.dest, Per(f.default, classifier=None, multitask=p2, bench=p2), f.kind, help_)
            else:
                row = Flag(f.dest, f.default, f.kind, f.help, idle=shaping_rule(r, f))
            rows.append(Flag(**{**{k.name: getattr(row, k.name) for k in fields(Flag)}, "what": f.what,
                                "when": f.when, "scripts": frozenset(scripts),
                                "group": Per(RECIPE, bench=BENCH_REGULARIZERS),
                                "not_gpt2": (f"({r.gpt2})" if weight else
                                             f"{f.what or 'shapes ' + r.label}, which GPT-2 does not have "
                                             f"({r.gpt2})") if r.gpt2 else None}))
    return rows


ROWS = _rows()
