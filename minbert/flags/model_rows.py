"""The flags that say what trains, on what: the model and its checkpoint, the data and where outputs go, Part 2's
model and losses, pretrain.py's text, Build GPT-2's sonnets, bench.py's own, and the adapters; one row each
(flag.Flag), listed with the others in flags/table.py. A default that is a decision (the learning rate, Part 1's
fine-tune mode, the dropout before a head, pretrain.py's recipe) is read from flags/defaults.py's table, with
its source; one that is a settings dataclass's own is read from there (flag.default)."""
from config import SHAPES
from minbert.course_data import TASK_PREFIX, data_file
from minbert.finetuning.lora import TARGETS
from minbert.finetuning.modes import BENCH_MODES, FINE_TUNE_MODES, GPT2_MODES, modes_help
from minbert.flag import ALL, BENCH, BERT, G1, GP, GS, P1, P2, PRE, TRAINING, Flag, Per, default
from minbert.flags import types
from minbert.flags.defaults import lr_help, ruled, sourced
from minbert.flags.rules import ADAPTERS_ONLY, BEAM, DISTILL, SAMPLING
from minbert.objectives.sentence_losses import STS_LOSSES
from minbert.specs import (GPT2_DATA, MAX_LENGTH, BenchSettings, ClassifierSettings, ModelSpec, MultitaskData,
                           MultitaskSettings, PretrainSettings, Recipe, SonnetSettings, TaskLosses)
from minbert.tasks.extra import EXTRA_HELP

ADAPTERS = "adapters (--fine-tune-mode lora, dora, adapter or prefix)"
EMBEDDINGS = ("sentence embeddings (minbert/objectives/sentence_losses.py; MNRL, SimCSE and the projection need "
              "siamese pairs: --pair_encoding siamese or mixed)")
# Build GPT-2's scripts start from GPT-2's checkpoint (and run from gpt2/, beside data/: specs.GPT2_DATA).
GPT2_PRETRAINED = "gpt2"
PAIR_ENCODINGS = ("cross", "siamese", "mixed")


def rows():
    """The rows of what trains, on what, in --help's order."""
    F = Flag
    return [
        # --- what is trained, on what
        F("fine_tune_mode", ruled("fine_tune_mode", "full-model"),
          Per(tuple(FINE_TUNE_MODES), gpt2_classifier=GPT2_MODES, gpt2_paraphrase=("full-model",),
              bench=BENCH_MODES),
          sourced("fine_tune_mode", Per(
              f"what trains: {modes_help(FINE_TUNE_MODES)} (minbert/finetuning/)",
              gpt2_classifier=f"what trains: {modes_help(GPT2_MODES, 'GPT-2')}",
              gpt2_paraphrase=f"what trains: {modes_help(['full-model'])}",
              bench=f"what trains: {modes_help(BENCH_MODES)}; adapters on query and value, as the pipelines' "
                    "default")),
          scripts=BERT | {G1, GP, BENCH}),
        F("pretrained", Per(default(ModelSpec, "pretrained"), gpt2_classifier=GPT2_PRETRAINED,
                            gpt2_paraphrase=GPT2_PRETRAINED, gpt2_sonnet=GPT2_PRETRAINED, bench=None), None,
          Per("bert-base-uncased (downloaded once), all-minilm-l6-v2 (packaged), a hub id, or a local folder",
              pretrain="the checkpoint to pretrain further",
              gpt2_classifier="gpt2, gpt2-medium, gpt2-large, gpt2-xl (downloaded once) or a checkpoint folder "
                              "in HF's layout", gpt2_paraphrase=..., gpt2_sonnet=...,
              bench="a checkpoint (default: random weights of --config)"), scripts=ALL),
        # the default by what trains, the checkpoint's width and the optimizer: flags/defaults.py resolve_lr
        F("lr", ruled("lr", None), "positive_float",
          Per(classifier=lr_help(P1, FINE_TUNE_MODES), multitask=lr_help(P2, FINE_TUNE_MODES),
              pretrain=f"peak learning rate (linear warm-up, then decay); {lr_help(PRE, ())}",
              gpt2_classifier=lr_help(G1, GPT2_MODES), gpt2_paraphrase=lr_help(GP, ("full-model",)),
              gpt2_sonnet=lr_help(GS, ())), scripts=TRAINING | {PRE}),
        F("use_gpu", False, "switch", Per("train on the GPU (CUDA, or Apple's MPS)", bench="time the GPU"),
          scripts=ALL),
        F("batch_size", Per(default(ClassifierSettings, "batch_size"), multitask=default(MultitaskData, "batch_size"),
                            pretrain=default(PretrainSettings, "batch_size"),
                            bench=default(BenchSettings, "batch_size")), "positive_int",
          Per("examples per optimizer step", classifier="examples per optimizer step (all ranks together)",
              multitask="examples per step (all ranks together)", pretrain="sentences (with --nsp: pairs) per step",
              gpt2_sonnet="sonnets per optimizer step", bench="examples per step"), scripts=ALL),
        # Part 1's head dropout is the handouts' (flags/defaults.py); Part 2's heads each take ModelSpec's
        F("hidden_dropout_prob", ruled("hidden_dropout_prob", ModelSpec().dropout[0]), "probability",
          sourced("hidden_dropout_prob", Per("dropout before the classifier head",
                                             multitask="dropout before every task head")),
          scripts=BERT | {G1, GP},
          idle=Per(None, multitask=(lambda flags, typed: "task_dropout" not in typed,
                                    "is every head's dropout, which --task_dropout replaces with one per head"),
                   gpt2_paraphrase=(lambda flags, typed: False, "is the dropout before a classifier head, which the "
                                                        "cloze task does not have (it answers with the LM head)"))),
        F("epochs", ruled("epochs", default(Recipe, "epochs")), "epochs",
          sourced("epochs", Per("passes over the training set", multitask="epochs of --steps_per_epoch steps",
                                pretrain="passes over the text")), scripts=TRAINING | {PRE}),
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
        F("num_beams", default(SonnetSettings, "num_beams"), "beams", "beam search's beams (1: greedy)",
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
        F("threads", None, "threads",
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
    ]


def adapter_rows():
    """The adapters' rows (--fine-tune-mode lora, dora, adapter, prefix), in --help's order."""
    F = Flag
    return [
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
          "--fine-tune-mode adapter: the width m of the Houlsby bottleneck adapters, at most the hidden size "
          "(minbert/finetuning/houlsby.py)",
          scripts=BERT | {G1}, group=ADAPTERS,
          idle=Per(None, classifier=(lambda flags, typed: flags["fine_tune_mode"] == "adapter",
                                     "sets the width of --fine-tune-mode adapter's adapters"), multitask=...),
          implied={GP}),
        F("prefix_length", default(ModelSpec, "prefix_length"), "positive_int",
          "--fine-tune-mode prefix: the number of trainable keys and values in every layer "
          "(minbert/finetuning/prefix.py)", scripts=BERT, group=ADAPTERS,
          not_gpt2="(prefix tuning is BERT's here: GPT-2 has no --fine-tune-mode prefix)",
          idle=Per(None, classifier=(lambda flags, typed: flags["fine_tune_mode"] == "prefix",
                                     "sets the length of --fine-tune-mode prefix's prefix"), multitask=...),
          implied={GP, G1}),
        F("merge", default(ClassifierSettings, "merge"), "switch",
          Per("fold LoRA/DoRA adapters into the weights (a prefix: drop its MLP) before the final predictions, "
              "so inference costs what the plain model does",
              multitask="fold LoRA/DoRA adapters into the weights (a prefix: drop its MLP) before the final "
                        "predictions (and in --eval_only), so inference costs what the plain model does"),
          scripts=BERT | {G1}, group=ADAPTERS,
          implied={GP}),
    ]
