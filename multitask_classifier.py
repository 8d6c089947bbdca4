"""Part 2: one BERT for sentiment (SST), paraphrase (Quora) and similarity (STS) (handout section 5).

    python multitask_classifier.py --fine-tune-mode full-model --lr 5e-5 --use_gpu

Fine-tuning modes: the whole model (default), the heads on a frozen BERT (last-linear-layer), or LoRA / DoRA
adapters on a frozen BERT (lora.py); --pals adds task-specific projected attention layers (pals.py) to
either a trained or a frozen backbone.

Pairs are cross-encoded ('[CLS] a [SEP] b [SEP]') by default, or siamese (--pair_encoding siamese:
paraphrase from [u, v, |u-v|, u*v], similarity as 5 * ReLU(cos(u, v))), or each task the way it does best
(--pair_encoding mixed: Quora cross-encoded, STS siamese). Tasks are trained jointly
with a batch sampler (annealed by default: p_i ~ N_i^alpha, alpha = 1 - 0.8 (e-1)/(E-1)), or one
after another with --sequential.
"""
import csv
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from bert import BertModel
from datasets import TaskData, data_file, read_examples
from evaluation import (MULTITASK, model_eval_multitask, multitask_mean, multitask_outputs, pair_inputs,
                        write_dev_scores, write_predictions)
from tokenizer import BertTokenizer
from flags import (ADAPTER_FLAGS, Parser, adapter_settings, add_adapter_flags, add_recipe_flags, add_speed_flags, parse_with_recipe, check_max_length, nonneg_float, nonneg_int, positive_float, positive_int,
                   probability)
from losses import CoSENTLoss, CosineSimilarityLoss, MultipleNegativesRankingLoss, SimCSELoss
from lora import ADAPTER_LR, ADAPTER_MODES, FINE_TUNE_MODES, check_merge, merge_for_inference, prepare_backbone
from pals import PALs
from precision import setup_precision
from runs import check_outputs, publish, run_folder
from smart import SmartRegularizer
from trainer import EarlyStopping, build_trainer, stop_signal
from utils import (MinbertError, append_jsonl, get_device, load_checkpoint, barrier, distributed, is_main,
                   load_trainable_state, main_print, maybe_compile, main_guard, require_same_flags, save_checkpoint,
                   seed_everything, set_interrupt_hint, trainable_state)

N_SENTIMENT = 5

PAIR_ENCODINGS = ("cross", "siamese", "mixed")


def task_encoding(pair_encoding, task):
    """'cross' or 'siamese' for one pair task. 'mixed' cross-encodes Quora, where reading both questions at
    once wins, and keeps STS siamese, where the cosine of two sentence embeddings wins (README, Results)."""
    if pair_encoding == "mixed":
        return "cross" if task == "quora" else "siamese"
    return pair_encoding


class MultitaskBERT(nn.Module):
    """One shared BERT, a head per task."""

    def __init__(self, config):
        super().__init__()
        self.bert = BertModel.from_pretrained(config.pretrained, **getattr(config, "bert_overrides", {}))
        prepare_backbone(self.bert, config)
        self.pals = PALs(self.bert.config, MULTITASK, config.pals_dim) if getattr(config, "pals", False) else None
        if self.pals is not None:
            self.pals.attach(self.bert)
        self.pooling = config.pooling
        self.encoding = {t: task_encoding(config.pair_encoding, t) for t in ("quora", "sts")}
        H = self.bert.config.hidden_size
        drop = config.task_dropout
        self.sst_head = nn.Sequential(nn.Dropout(drop["sst"]), nn.Linear(H, N_SENTIMENT))
        # --siamese_proj: one linear map shared by both sentences, before the cosine and the pair features
        proj = getattr(config, "siamese_proj", 0)
        self.proj = nn.Linear(H, proj) if proj else None
        pair_width = H if self.encoding["quora"] == "cross" else 4 * (proj or H)
        self.para_head = nn.Sequential(nn.Dropout(drop["quora"]), nn.Linear(pair_width, 1))
        # Siamese similarity is the embeddings' cosine itself (no parameters), as Sentence-BERT does it.
        self.sts_head = nn.Sequential(nn.Dropout(drop["sts"]), nn.Linear(H, 1)) if self.encoding["sts"] == "cross" else None

    def forward(self, input_ids, attention_mask, token_type_ids=None):
        """A sentence (or cross-encoded pair) embedding: [CLS] state, pooler output, or masked mean."""
        out = self.bert(input_ids, attention_mask, token_type_ids)
        if self.pooling == "pooler":
            return out["pooler_output"]
        hidden = out["last_hidden_state"]
        if self.pooling == "cls":
            return hidden[:, 0]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)

    def task(self, name):
        """Route the next forward through task `name`'s PALs (a no-op without --pals)."""
        if self.pals is not None:
            self.pals.task = name

    def predict_sentiment(self, input_ids, attention_mask, token_type_ids=None):
        """Logits over the five SST classes."""
        self.task("sst")
        return self.sst_head(self(input_ids, attention_mask, token_type_ids))

    def predict_paraphrase(self, input_ids_1, attention_mask_1, input_ids_2=None, attention_mask_2=None,
                           token_type_ids=None):
        """One logit per pair (> 0 means paraphrase). Siamese: the handout's two inputs; cross: the pair
        as one input in input_ids_1 with its token_type_ids."""
        self.task("quora")
        if self.encoding["quora"] == "cross":
            return self.para_head(self(input_ids_1, attention_mask_1, token_type_ids)).squeeze(-1)
        return self.paraphrase_logit(*self.embed_pair(input_ids_1, attention_mask_1, input_ids_2, attention_mask_2))

    def predict_similarity(self, input_ids_1, attention_mask_1, input_ids_2=None, attention_mask_2=None,
                           token_type_ids=None):
        """Similarity on the STS scale 0..5."""
        return 5.0 * F.relu(self.similarity_score(input_ids_1, attention_mask_1, input_ids_2, attention_mask_2,
                                                  token_type_ids))

    def similarity_score(self, input_ids_1, attention_mask_1, input_ids_2=None, attention_mask_2=None,
                         token_type_ids=None):
        """The score the similarity losses train: cos(u, v) for siamese pairs, in (0, 1) for cross ones."""
        self.task("sts")
        if self.encoding["sts"] == "cross":
            return torch.sigmoid(self.sts_head(self(input_ids_1, attention_mask_1, token_type_ids)).squeeze(-1))
        return F.cosine_similarity(*self.embed_pair(input_ids_1, attention_mask_1, input_ids_2, attention_mask_2), dim=-1)

    # siamese pieces, also used by the sentence-embedding losses (losses.py)
    def project(self, pooled):
        return pooled if self.proj is None else self.proj(pooled)

    def embed_sentence(self, input_ids, attention_mask):
        """A sentence's embedding for cosine and pair features: pooled, then --siamese_proj."""
        return self.project(self(input_ids, attention_mask))

    def embed_pair(self, ids1, mask1, ids2, mask2):
        if ids2 is None:
            raise ValueError("siamese pair encoding needs both sentences (input_ids_2, attention_mask_2)")
        return self.embed_sentence(ids1, mask1), self.embed_sentence(ids2, mask2)

    def paraphrase_logit(self, u, v):
        return self.para_head(torch.cat([u, v, (u - v).abs(), u * v], dim=-1)).squeeze(-1)


# ----------------------------------------------------------------------------- training

# How SMART compares a task's perturbed and clean outputs (smart.divergence).
OUTPUT_KIND = {"sst": "multiclass", "quora": "binary", "sts": "regression"}


def task_loss(weights, smart=None, sts_loss="mse", mnrl_weight=0.0, mnrl_scale=20.0, simcse_weight=0.0):
    """The weighted loss of a one-task batch, or {task: loss} for a batch holding every task (--sampler all).
    Added to a task's own loss when asked: SMART's smoothness term (a SmartRegularizer), MNRL on the batch's
    positive pairs and SimCSE on its first sentences (sentence embeddings only: not on cross-encoded pairs;
    losses.py)."""
    similarity = {"cosine": CosineSimilarityLoss(), "cosent": CoSENTLoss()}.get(sts_loss)
    mnrl, simcse = MultipleNegativesRankingLoss(mnrl_scale), SimCSELoss()

    def one(model, batch):
        task, y = batch["task"], batch["labels"]
        siamese = task != "sst" and model.encoding[task] == "siamese"
        extra, first = 0.0, None  # first: the first sentences' embeddings, where the batch has any
        if siamese:  # the two embeddings once, for the task output and the embedding losses alike
            p = pair_inputs(batch)
            model.task(task)
            u, v = model.embed_pair(p["input_ids_1"], p["attention_mask_1"], p["input_ids_2"], p["attention_mask_2"])
            first = u
            score = F.cosine_similarity(u, v, dim=-1)
            out = model.paraphrase_logit(u, v) if task == "quora" else 5.0 * F.relu(score)
            positive = (y == 1) if task == "quora" else (y >= 4.0)
            if mnrl_weight and int(positive.sum()) >= 2:  # one positive alone has no in-batch negative
                extra = extra + mnrl_weight * mnrl(u[positive], v[positive])
        elif task == "sst" and simcse_weight:
            model.task(task)
            pooled = model(**batch["x"])
            out, first = model.sst_head(pooled), model.project(pooled)
        else:
            out = multitask_outputs(model, task, batch)
            score = out / 5.0 if task == "sts" else None
        if simcse_weight and first is not None:  # the same first sentences again: only dropout differs
            ids = batch["a"] if siamese else batch["x"]
            extra = extra + simcse_weight * simcse(first, model.embed_sentence(ids["input_ids"], ids["attention_mask"]))
        if task == "sst":
            loss = F.cross_entropy(out, y)
        elif task == "quora":
            loss = F.binary_cross_entropy_with_logits(out, y.float())
        else:
            loss = F.mse_loss(out, y) if similarity is None else similarity(score, y)
        if smart is not None:
            loss = loss + smart(model.bert, lambda: multitask_outputs(model, task, batch), out, OUTPUT_KIND[task])
        return weights[task] * (loss + extra)

    def loss_fn(model, batch):
        if "parts" in batch:
            return {task: one(model, part) for task, part in batch["parts"].items()}
        return one(model, batch)
    return loss_fn


def task_loss_from_args(args, smart=None):
    """task_loss with the run's --loss_weights, --sts_loss, --mnrl_* and --simcse_weight."""
    return task_loss(dict(zip(MULTITASK, args.loss_weights)), smart, args.sts_loss, args.mnrl_weight,
                     args.mnrl_scale, args.simcse_weight)


def annealed_alpha(epoch, epochs):
    """Stickland & Murray's annealing: alpha = 1 - 0.8 (e - 1) / (E - 1), e = 1..E."""
    return 1.0 if epochs == 1 else 1.0 - 0.8 * epoch / (epochs - 1)


def task_schedule(sizes, mode, steps, epoch, epochs, rng, batch_size):
    """The task of every step of one epoch. `sizes` maps task -> number of training examples."""
    tasks = list(sizes)
    if mode == "sequential":  # every task's training set, one task after another
        full = {t: -(-sizes[t] // batch_size) for t in tasks}
        scale = steps / sum(full.values())  # a step budget shrinks (or grows) every task's share alike
        return [t for t in tasks for _ in range(round(full[t] * scale))]
    if mode == "round-robin":
        return [tasks[i % len(tasks)] for i in range(steps)]
    if mode == "all":  # one batch of every task per step: as many batches as the other samplers
        return ["all"] * -(-steps // len(tasks))
    n = np.array([sizes[t] for t in tasks], dtype=np.float64)
    p = n if mode == "proportional" else n ** annealed_alpha(epoch, epochs)
    return list(rng.choice(tasks, size=steps, p=p / p.sum()))


class BatchStream:
    """Endless batches of one task: a new bucketed, shuffled pass whenever one runs out."""

    def __init__(self, data, batch_size, seed, bucket, rank=0, world_size=1):
        self.data, self.batch_size, self.seed, self.bucket = data, batch_size, seed, bucket
        self.rank, self.world_size, self.passes = rank, world_size, 0
        self.it = iter(())

    def __next__(self):
        for _ in range(2):
            for b in self.it:
                return b
            self.it = self.data.batches(self.batch_size, True, self.seed * 7919 + self.passes, self.bucket,
                                        self.rank, self.world_size)
            self.passes += 1
        raise MinbertError(f"{self.data.task.name}: no training batches")


# ----------------------------------------------------------------------------- flags

ARCH_FLAGS = {"pretrained": "--pretrained", "pair_encoding": "--pair_encoding", "pooling": "--pooling",
              "fine_tune_mode": "--fine-tune-mode", "pals": "--pals", "pals_dim": "--pals_dim",
              "siamese_proj": "--siamese_proj", **ADAPTER_FLAGS}


# The handout's flag prefix of each task: --para_train, --para_dev_out, ... are Quora's.
FLAG_PREFIX = {"sst": "sst", "quora": "para", "sts": "sts"}


# The handout's defaults, for --recipe handout (ours are the recipe measured best on MiniLM, see README).
HANDOUT_DEFAULTS = {"fine_tune_mode": "last-linear-layer", "batch_size": 8, "hidden_dropout_prob": 0.3, "lr": 1e-5}


def get_args(argv=None):
    ap = Parser(description=__doc__)
    for task, prefix in FLAG_PREFIX.items():
        for split in ("train", "dev", "test"):
            ap.add_argument(f"--{prefix}_{split}", default=None,
                            help=f"default: {data_file('DATA_DIR', task, split)}")
    ap.add_argument("--seed", type=int, default=11711)
    ap.add_argument("--epochs", type=positive_int, default=10)
    ap.add_argument("--fine-tune-mode", dest="fine_tune_mode", choices=FINE_TUNE_MODES, default="full-model",
                    help="full-model, last-linear-layer (frozen BERT), or lora / dora (adapters on a frozen BERT)")
    ap.add_argument("--use_gpu", action="store_true")
    for prefix in FLAG_PREFIX.values():
        for split in ("dev", "test"):
            ap.add_argument(f"--{prefix}_{split}_out", default=f"predictions/{prefix}-{split}-output.csv",
                            help="where this run's file is copied (the run folder keeps its own)")
    ap.add_argument("--batch_size", type=positive_int, default=32)
    ap.add_argument("--hidden_dropout_prob", type=probability, default=0.1, help="dropout before every task head")
    ap.add_argument("--lr", type=positive_float, default=None,
                    help="default 1e-4; 1e-3 when only adapters (lora, dora) or PALs and heads train")
    # ours
    ap.add_argument("--pretrained", default="bert-base-uncased")
    ap.add_argument("--data_dir", default="data")
    ap.add_argument("--max_length", type=positive_int, default=128,
                    help="tokens per input, at most the checkpoint's max_position_embeddings")
    add_speed_flags(ap)
    add_adapter_flags(ap)
    ap.add_argument("--pals", action="store_true",
                    help="projected attention layers per task beside every BERT layer (Stickland & Murray 2019); "
                         "the backbone trains with full-model and stays frozen with last-linear-layer")
    ap.add_argument("--pals_dim", type=positive_int, default=None,
                    help="the PALs' width d_s (default: 204 scaled from BERT-base to the checkpoint's hidden size)")
    # the best recipe measured on MiniLM (README, "Training recipe"); --recipe handout restores the plain one
    add_recipe_flags(ap, smart_weight=1.0)
    ap.add_argument("--weight_decay", type=nonneg_float, default=0.0)
    ap.add_argument("--pair_encoding", choices=PAIR_ENCODINGS, default="cross",
                    help="cross: '[CLS] a [SEP] b [SEP]'; siamese: two sentence embeddings; mixed: Quora cross, STS siamese")
    ap.add_argument("--pooling", choices=["cls", "pooler", "mean"], default="mean")
    g = ap.add_argument_group("sentence embeddings (losses.py; MNRL, SimCSE and the projection need siamese pairs: --pair_encoding siamese or mixed)")
    g.add_argument("--sts_loss", choices=["mse", "cosine", "cosent"], default="mse",
                   help="STS objective: MSE on 0-5, cosine regression to score/5, or CoSENT's ranking loss")
    g.add_argument("--mnrl_weight", type=nonneg_float, default=0.0,
                   help="multiple negatives ranking loss on Quora duplicates and STS pairs with gold >= 4 (0: off)")
    g.add_argument("--mnrl_scale", type=positive_float, default=20.0, help="MNRL's scale on the cosine")
    g.add_argument("--simcse_weight", type=nonneg_float, default=0.0,
                   help="unsupervised SimCSE on each batch's sentences, temperature 0.05 (0: off)")
    g.add_argument("--siamese_proj", type=nonneg_int, default=0,
                   help="a shared linear projection to this many dimensions before cosine and pair features (0: off)")
    ap.add_argument("--sequential", action="store_true", help="train the tasks one after another each epoch")
    ap.add_argument("--sampler", choices=["annealed", "proportional", "round-robin", "all"], default="annealed",
                    help="all: one batch of every task in each optimizer step (losses summed, or PCGrad)")
    ap.add_argument("--pcgrad", action="store_true",
                    help="gradient surgery (Yu et al. 2020) on the per-task gradients; needs --sampler all")
    ap.add_argument("--steps_per_epoch", type=positive_int, default=None,
                    help="joint training steps per epoch (default: one pass's worth of batches over all tasks)")
    ap.add_argument("--loss_weights", type=nonneg_float, nargs=3, default=[1.0, 1.0, 1.0],
                    metavar=("SST", "QUORA", "STS"))
    ap.add_argument("--task_dropout", type=probability, nargs=3, default=None, metavar=("SST", "QUORA", "STS"),
                    help="per-head dropout (default: --hidden_dropout_prob for all three)")
    ap.add_argument("--run_name", default="",
                    help="the run's folder under runs/ (default: multitask-TIMESTAMP); an existing one is refused")
    ap.add_argument("--checkpoint", default=None,
                    help="the best model's path (default: runs/RUN_NAME/multitask.pt); an explicit path is reused "
                         "as it is, and the run's other files go beside it")
    ap.add_argument("--eval_only", metavar="CHECKPOINT", help="re-score a saved model and rewrite the six files")
    ap.add_argument("--results", default="predictions/multitask-results.csv",
                    help="every run appends a row here")
    args = parse_with_recipe(ap, argv, HANDOUT_DEFAULTS)
    if args.lr is None:
        only_new = args.fine_tune_mode in ADAPTER_MODES or (args.pals and args.fine_tune_mode == "last-linear-layer")
        args.lr = ADAPTER_LR if only_new else 1e-4
    if args.pair_encoding == "cross" and not args.eval_only:
        needs = [f for f in ("mnrl_weight", "simcse_weight", "siamese_proj") if getattr(args, f)]
        if needs:
            raise MinbertError(f"--{needs[0]} works on sentence embeddings, which cross-encoded pairs do not have: "
                               f"add --pair_encoding siamese (or mixed)")
    if args.merge and not args.eval_only:  # in --eval_only the mode comes from the checkpoint
        check_merge(args.fine_tune_mode)
    if args.pcgrad and args.sampler != "all":
        raise MinbertError("--pcgrad needs the gradients of every task in one step: add --sampler all")
    if args.pcgrad and args.sequential:
        raise MinbertError("--pcgrad cannot be combined with --sequential (one task at a time)")
    if args.sampler == "all" and distributed()[1] > 1:
        raise MinbertError("--sampler all (and --pcgrad) run in one process only; drop torchrun or pick another sampler")
    typed = {a.split("=", 1)[0] for a in (sys.argv[1:] if argv is None else argv)}
    args.explicit = {k for k, flag in ARCH_FLAGS.items() if flag in typed}
    for task, prefix in FLAG_PREFIX.items():
        for split in ("train", "dev", "test"):
            if getattr(args, f"{prefix}_{split}") is None:
                setattr(args, f"{prefix}_{split}", str(data_file(args.data_dir, task, split)))
    return args


def model_config(args):
    drop = args.task_dropout or [args.hidden_dropout_prob] * 3
    return SimpleNamespace(pretrained=args.pretrained, fine_tune_mode=args.fine_tune_mode, pooling=args.pooling,
                           pair_encoding=args.pair_encoding, task_dropout=dict(zip(MULTITASK, drop)),
                           bert_overrides={"attn_impl": args.attn}, **adapter_settings(args), pals=args.pals, pals_dim=args.pals_dim, siamese_proj=args.siamese_proj)


def load_data(args, splits):
    tokenizer = BertTokenizer.from_pretrained(args.pretrained)
    data = {}
    for split in splits:
        data[split] = {}
        for task in MULTITASK:
            examples = read_examples(getattr(args, f"{FLAG_PREFIX[task]}_{split}"), task, split)
            data[split][task] = TaskData(examples, task, tokenizer, args.max_length, task_encoding(args.pair_encoding, task))
    return data


def output_name(task, split):
    """A leaderboard file's name in a run folder (and in ensemble.py's --out)."""
    return f"{FLAG_PREFIX[task]}-{split}-output.csv"


def published_paths(args):
    """{run-folder file name: the handout's path it is copied to} for the six leaderboard files."""
    return {output_name(task, split): Path(getattr(args, f"{prefix}_{split}_out"))
            for task, prefix in FLAG_PREFIX.items() for split in ("dev", "test")}


def write_outputs(args, data, model, device, folder):
    """Score dev, predict test, write the six leaderboard files into `folder` and publish them to the
    handout's paths; returns the dev scores."""
    raw = {}
    scores, dev_preds = model_eval_multitask(model, data["dev"], 64, device, args.amp, raw=raw)
    _, test_preds = model_eval_multitask(model, data["test"], 64, device, args.amp)
    for task, prefix in FLAG_PREFIX.items():
        # raw dev outputs for report.py: in the run folder only, never published to the zip
        write_dev_scores(Path(folder) / f"{prefix}-dev-scores.npz", task, data["dev"][task], raw[task], dev_preds[task])
        for split, preds in (("dev", dev_preds), ("test", test_preds)):
            write_predictions(Path(folder) / output_name(task, split), task, data[split][task].ids, preds[task])
    publish([(Path(folder) / name, dest) for name, dest in published_paths(args).items()], args.run_name, folder)
    return scores


def format_scores(s):
    return (f"SST acc {s['sst']:.3f}, Quora acc {s['quora']:.3f}, STS r {s['sts']:.3f}, "
            f"mean {multitask_mean(s):.3f}")


def check_arch(saved, args, source):
    """Flags the user gave that contradict the checkpoint are an error; flags not given are taken from it."""
    given = {k: flag for k, flag in ARCH_FLAGS.items() if k in args.explicit}
    require_same_flags(saved, args, given, source, "cannot evaluate")
    for k in ARCH_FLAGS:
        setattr(args, k, saved.get(k, getattr(args, k)))
    for k in ("task_dropout", "hidden_dropout_prob", "max_length"):
        setattr(args, k, saved.get(k, getattr(args, k)))


def load_multitask(path, args, device):
    """The model saved in checkpoint `path`, built with its own architecture flags (which `args` takes
    on; contradicting ones that were given explicitly are an error). Returns (model, checkpoint)."""
    state = load_checkpoint(path)
    saved = state.get("args")
    if not isinstance(saved, dict) or "pair_encoding" not in saved or "model" not in state:
        raise MinbertError(f"{path}: not a multitask_classifier.py checkpoint (no multitask model and flags in it)")
    check_arch(saved, args, path)
    model = MultitaskBERT(model_config(args)).to(device)
    load_trainable_state(model, state["model"], path)
    return model, state


def eval_only(args, device):
    model, state = load_multitask(args.eval_only, args, device)
    merge_for_inference(model.bert, args, main_print)
    data = load_data(args, ("dev", "test"))
    args.run_name = state["args"].get("run_name") or Path(args.eval_only).parent.name
    scores = write_outputs(args, data, model, device, Path(args.eval_only).parent)
    print(f"{args.eval_only} (epoch {state['epoch']}): dev {format_scores(scores)}")
    return scores


def train_multitask(args, device, on_epoch=None):
    """Train, keep the best dev mean, write the six files. `on_epoch(epoch, dev_mean)` is called after each
    epoch's evaluation (sweep.py's pruner: it may raise to stop the run)."""
    t_start = time.perf_counter()
    seed_everything(args.seed)
    data = load_data(args, ("train", "dev", "test"))
    model = maybe_compile(MultitaskBERT(model_config(args)).to(device), args.compile)
    train = data["train"]
    sizes = {t: len(d) for t, d in train.items()}
    rank, world = distributed()
    streams = {t: BatchStream(d, args.batch_size, args.seed + i, args.bucket, rank, world)
               for i, (t, d) in enumerate(train.items())}
    steps = args.steps_per_epoch or sum(-(-n // args.batch_size) for n in sizes.values())
    mode = "sequential" if args.sequential else args.sampler
    steps_per_epoch = len(task_schedule(sizes, mode, steps, 0, args.epochs, np.random.default_rng(0), args.batch_size))
    trainer = build_trainer(model, args, device, steps_per_epoch, pcgrad=args.pcgrad)
    smart = SmartRegularizer(args.smart_weight, args.smart_eps, args.smart_step, args.smart_steps) \
        if args.smart_weight else None
    loss_fn = task_loss_from_args(args, smart)
    log_path = Path(args.checkpoint).with_suffix(".jsonl")
    set_interrupt_hint(None)
    stopper, best_scores = EarlyStopping(args.patience), None
    main_print(f"multitask: {mode} training, {args.pair_encoding} pairs, {args.pooling} pooling, "
          f"{args.fine_tune_mode}{' + PALs' if args.pals else ''}, lr {args.lr:g}, {args.pretrained} on {device}" + (f", {world} processes" if world > 1 else "")
               + f"; train sizes {sizes}")
    for d in train.values():
        main_print(d.describe_batches(args.batch_size, args.bucket))
    for epoch in range(args.epochs):
        rng = np.random.default_rng(args.seed * 1000 + epoch)
        schedule = task_schedule(sizes, mode, steps, epoch, args.epochs, rng, args.batch_size)

        def next_batch(task):
            batch = next(streams[task])
            batch["task"] = task
            return batch

        def batches():
            for task in schedule:
                yield ({"task": "all", "parts": {t: next_batch(t) for t in MULTITASK}} if task == "all"
                       else next_batch(task))
        stats = trainer.run_epoch(batches(), loss_fn, len(schedule), desc=f"epoch {epoch}")
        if not is_main():  # rank 0 alone evaluates, saves and logs; the others wait for it
            barrier()
            if stop_signal(False):
                break
            continue
        scores, _ = model_eval_multitask(model, data["dev"], 64, device, args.amp)
        mean = multitask_mean(scores)
        counts = {t: schedule.count(t) + schedule.count("all") for t in MULTITASK}
        append_jsonl(log_path, {"epoch": epoch, **stats, "dev": scores, "dev_mean": mean, "batches": counts,
                                "run": args.run_name})
        print(f"epoch {epoch}: loss {stats['train_loss']:.3f}, batches {counts}, dev {format_scores(scores)}, "
              f"{stats['seconds'] / 60:.1f} min, {stats['tokens_per_s']:.0f} tokens/s")
        if stopper.update(mean, epoch):
            best_scores = scores
            save_checkpoint(args.checkpoint, {"model": trainable_state(model), "args": vars(args), "epoch": epoch,
                                              "scores": scores})
        set_interrupt_hint(f"the best model so far (epoch {stopper.best_epoch}, dev mean {stopper.best:.3f}) is in "
                           f"{args.checkpoint}; score it with --eval_only {args.checkpoint} (a multitask run cannot resume)")
        if on_epoch is not None:
            on_epoch(epoch, mean)
        barrier()
        if stop_signal(stopper.should_stop):
            print(stopper.reason("dev mean"))
            append_jsonl(log_path, {"run": args.run_name, "stopped": stopper.reason("dev mean")})
            break
    if not is_main():
        return None
    best_epoch = stopper.best_epoch
    minutes = (time.perf_counter() - t_start) / 60
    state = load_checkpoint(args.checkpoint)
    load_trainable_state(model, state["model"], args.checkpoint)
    merge_for_inference(model.bert, args, main_print)
    write_outputs(args, data, model, device, Path(args.checkpoint).parent)
    append_result(args, mode, best_scores, best_epoch, minutes)
    print(f"best epoch {best_epoch}: dev {format_scores(best_scores)}; run folder {Path(args.checkpoint).parent} "
          f"(checkpoint, log {log_path.name}, predictions); results table {args.results}; {minutes:.1f} minutes")
    return best_scores


RESULT_FIELDS = ["run", "training", "pair_encoding", "pooling", "fine_tune_mode", "pretrained", "lr", "batch_size",
                 "epochs", "steps_per_epoch", "seed", "loss_weights", "sst_acc", "quora_acc", "sts_r", "mean",
                 "best_epoch", "minutes"]


def append_result(args, mode, s, best_epoch, minutes):
    path = Path(args.results)
    path.parent.mkdir(parents=True, exist_ok=True)
    new = not path.exists()
    row = {"run": args.run_name, "training": mode, "pair_encoding": args.pair_encoding, "pooling": args.pooling,
           "fine_tune_mode": args.fine_tune_mode, "pretrained": args.pretrained, "lr": args.lr,
           "batch_size": args.batch_size, "epochs": args.epochs, "steps_per_epoch": args.steps_per_epoch or "",
           "seed": args.seed, "loss_weights": " ".join(f"{w:g}" for w in args.loss_weights),
           "sst_acc": f"{s['sst']:.4f}", "quora_acc": f"{s['quora']:.4f}", "sts_r": f"{s['sts']:.4f}",
           "mean": f"{multitask_mean(s):.4f}", "best_epoch": best_epoch, "minutes": f"{minutes:.1f}"}
    with open(path, "a", newline="") as fp:
        w = csv.DictWriter(fp, RESULT_FIELDS)
        if new:
            w.writeheader()
        w.writerow(row)


def main(argv=None, on_epoch=None):
    args = get_args(argv)
    device = get_device(args.use_gpu)
    setup_precision(args, device, log=main_print)
    outputs = list(published_paths(args).values())
    if args.eval_only:
        check_outputs(files=outputs)
        return eval_only(args, device)
    check_max_length(args.max_length, args.pretrained)
    if args.checkpoint is None:
        args.checkpoint = str(run_folder(args, "multitask") / "multitask.pt")
    else:
        run_folder(args, "multitask", Path(args.checkpoint).parent)
    check_outputs(dirs=[Path(args.checkpoint).parent], files=outputs + [args.checkpoint, args.results])
    return train_multitask(args, device, on_epoch)


if __name__ == "__main__":
    main_guard(main)
