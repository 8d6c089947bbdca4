"""Part 1: fine-tune BERT for sentiment on SST and CFIMDB (handout section 4).

    python classifier.py --fine-tune-mode full-model --lr 1e-5 [--use_gpu]

--fine-tune-mode lora|dora trains low-rank adapters on a frozen BERT (lora.py) instead.
"""
import time
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.nn as nn
import torch.nn.functional as F

from bert import BertModel
from datasets import TASKS, TaskData, data_file, read_examples
from evaluation import accuracy, macro_f1, predict, write_dev_scores, write_predictions
from tokenizer import BertTokenizer
from flags import (ADAPTER_FLAGS, Parser, adapter_settings, add_adapter_flags, add_recipe_flags, add_speed_flags, check_max_length, nonneg_float, parse_with_recipe,
                   positive_float, positive_int, probability)
from lora import ADAPTER_LR, FINE_TUNE_MODES, check_merge, merge_for_inference, prepare_backbone
from precision import setup_precision
from runs import check_outputs, publish, run_folder
from smart import SmartRegularizer
from trainer import EarlyStopping, build_trainer, stop_signal
from utils import (MinbertError, append_jsonl, get_device, load_checkpoint, barrier, distributed, is_main, load_trainable_state,
                   main_print, maybe_compile, main_guard, require_same_flags, rng_state, save_checkpoint,
                   seed_everything, set_interrupt_hint, set_rng_state, trainable_state)


class BertSentimentClassifier(nn.Module):
    """BERT -> pooler_output -> dropout -> linear. In 'last-linear-layer' mode BERT is frozen; in 'lora' and
    'dora' only its adapters train."""

    def __init__(self, config):
        super().__init__()
        self.num_labels = config.num_labels
        self.bert = BertModel.from_pretrained(config.pretrained, **getattr(config, "bert_overrides", {}))
        prepare_backbone(self.bert, config)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(self.bert.config.hidden_size, config.num_labels)

    def embed(self, input_ids, attention_mask, token_type_ids=None):
        return self.bert(input_ids, attention_mask, token_type_ids)["pooler_output"]

    def forward(self, input_ids=None, attention_mask=None, token_type_ids=None, features=None):
        """Logits; `features` are cached pooler outputs of a frozen BERT, used instead of running it."""
        pooled = features if features is not None else self.embed(input_ids, attention_mask, token_type_ids)
        return self.classifier(self.dropout(pooled))


def logits_of(model, batch):
    if "features" in batch:
        return model(features=batch["features"])
    return model(**batch["x"])


def classification_loss(smart=None):
    """Cross entropy, plus SMART's smoothness term when a SmartRegularizer is given."""
    def loss_fn(model, batch):
        logits = logits_of(model, batch)
        loss = F.cross_entropy(logits, batch["labels"])
        if smart is not None:
            loss = loss + smart(model.bert, lambda: logits_of(model, batch), logits, "multiclass")
        return loss
    return loss_fn


# full-model's default learning rate: the best measured on MiniLM (README), and the handout's.
FULL_MODEL_LR = {"best": 1e-4, "handout": 1e-5}


def get_args(argv=None):
    ap = Parser(description=__doc__)
    ap.add_argument("--fine-tune-mode", dest="fine_tune_mode", choices=FINE_TUNE_MODES, default="last-linear-layer")
    ap.add_argument("--lr", type=positive_float, default=None,
                    help=f"default 1e-3 for last-linear-layer, lora and dora; for full-model {FULL_MODEL_LR['best']:g} "
                         f"(--recipe handout: {FULL_MODEL_LR['handout']:g})")
    ap.add_argument("--use_gpu", action="store_true")
    ap.add_argument("--batch_size", type=positive_int, default=8)
    ap.add_argument("--hidden_dropout_prob", type=probability, default=0.3)
    ap.add_argument("--epochs", type=positive_int, default=10)
    ap.add_argument("--seed", type=int, default=11711)
    ap.add_argument("--pretrained", default="bert-base-uncased",
                    help="bert-base-uncased (downloaded once), all-minilm-l6-v2 (packaged), or a local folder")
    ap.add_argument("--data_dir", default="data")
    ap.add_argument("--datasets", nargs="+", choices=["sst", "cfimdb"], default=["sst", "cfimdb"])
    ap.add_argument("--max_length", type=positive_int, default=512,
                    help="tokens per input, at most the checkpoint's max_position_embeddings")
    add_speed_flags(ap)
    add_adapter_flags(ap)
    # the best recipe measured on MiniLM SST (README): no clipping; SMART 1.0 for full-model (resolved below)
    add_recipe_flags(ap, smart_weight=None)
    ap.add_argument("--weight_decay", type=nonneg_float, default=0.0)
    ap.add_argument("--run_name", default="",
                    help="the run's folder under runs/ (default: classifier-TIMESTAMP); an existing one is refused")
    ap.add_argument("--checkpoint_dir", default=None,
                    help="write checkpoints and logs here instead of runs/RUN_NAME (reused as it is)")
    ap.add_argument("--predictions_dir", default="predictions",
                    help="where the leaderboard files of this run are copied (the run folder keeps its own)")
    ap.add_argument("--resume", action="store_true",
                    help="continue from the last completed epoch's checkpoint (of --run_name, else the newest run)")
    args = parse_with_recipe(ap, argv, {})
    if args.lr is None:
        args.lr = FULL_MODEL_LR[args.recipe] if args.fine_tune_mode == "full-model" else ADAPTER_LR
    if args.smart_weight is None:  # SMART needs BERT in the graph: on by default for full-model only
        args.smart_weight = 1.0 if args.fine_tune_mode == "full-model" else 0.0
    if args.smart_weight and args.fine_tune_mode == "last-linear-layer":
        raise MinbertError("--smart_weight perturbs BERT's embeddings, but last-linear-layer trains on cached "
                           "features of a frozen BERT: use --fine-tune-mode full-model")
    if args.merge:
        check_merge(args.fine_tune_mode)
    return args


def load_split(args, name, split, tokenizer):
    examples = read_examples(data_file(args.data_dir, name, split), name, split)
    return TaskData(examples, name, tokenizer, max_length=args.max_length)


def paths_for(args, name):
    """The run folder's files for one dataset, and the handout's paths its predictions are published to."""
    stem = f"{args.fine_tune_mode}-{name}"
    ck, pred = Path(args.run_dir), Path(args.predictions_dir)
    return SimpleNamespace(best=ck / f"{stem}.pt", last=ck / f"{stem}-last.pt", log=ck / f"{stem}-log.jsonl",
                           dev=ck / f"{stem}-dev-out.csv", test=ck / f"{stem}-test-out.csv",
                           published={"dev": pred / f"{stem}-dev-out.csv", "test": pred / f"{stem}-test-out.csv"})


def run_dataset(args, name, device, on_epoch=None):
    """Train on one dataset, keep the best dev epoch, reload it and write dev and test predictions.
    `on_epoch(epoch, dev_acc)` is called after each epoch's evaluation (sweep.py's pruner may raise there)."""
    seed_everything(args.seed)
    rank, world = distributed()
    paths = paths_for(args, name)
    tokenizer = BertTokenizer.from_pretrained(args.pretrained)
    data = {s: load_split(args, name, s, tokenizer) for s in ("train", "dev", "test")}
    config = SimpleNamespace(pretrained=args.pretrained, fine_tune_mode=args.fine_tune_mode,
                             hidden_dropout_prob=args.hidden_dropout_prob, num_labels=TASKS[name].num_labels,
                             bert_overrides={"attn_impl": args.attn}, **adapter_settings(args))
    model = BertSentimentClassifier(config).to(device)
    frozen = args.fine_tune_mode == "last-linear-layer"
    if frozen:  # the backbone never changes: run it once per split, train the head on its outputs
        model.bert.eval()
        for s, d in data.items():
            d.features = torch.from_numpy(predict(lambda b: model.embed(**b["x"]), d, 64, device, args.amp,
                                                  desc=f"{name} {s} features"))
    maybe_compile(model, args.compile and not frozen)  # a frozen backbone has already done its work
    n_train = len(data["train"])
    total = -(-n_train // args.batch_size)
    trainer = build_trainer(model, args, device, total)
    optimizer = trainer.optimizer
    smart = SmartRegularizer(args.smart_weight, args.smart_eps, args.smart_step, args.smart_steps) \
        if args.smart_weight else None

    def evaluate(split, keep_scores=False):
        model.eval()
        logits = predict(lambda b: logits_of(model, b), data[split], 64, device, args.amp, desc=f"{name} {split}")
        if keep_scores:  # for report.py's diagnostics; in the run folder only, never in the zip
            write_dev_scores(args.run_dir / f"{args.fine_tune_mode}-{name}-dev-scores.npz", name, data[split],
                             logits, logits.argmax(-1))
        return logits.argmax(-1)

    start, stopper = 0, EarlyStopping(args.patience)
    if args.resume and paths.last.exists():
        state = load_checkpoint(paths.last)
        require_same_flags(state["args"], args, RUN_DEFINING, paths.last, "cannot resume")
        load_trainable_state(model, state["model"], paths.last)
        optimizer.load_state_dict(state["optimizer"])
        trainer.scheduler.load_state_dict(state["scheduler"])
        set_rng_state(state["rng"])
        start, stopper = state["epoch"] + 1, EarlyStopping(args.patience, **state["stopper"])
        main_print(f"resumed {name} from {paths.last} after epoch {state['epoch']}")
    main_print(data["train"].describe_batches(args.batch_size, args.bucket))
    for epoch in range(start, args.epochs):
        batches = data["train"].batches(args.batch_size, shuffle=True, seed=args.seed * 1000 + epoch, bucket=args.bucket,
                                        rank=rank, world_size=world)
        stats = trainer.run_epoch(batches, classification_loss(smart), total, desc=f"{name} epoch {epoch}")
        if not is_main():  # rank 0 alone evaluates, saves and logs; the others wait for it
            barrier()
            if stop_signal(False):
                break
            continue
        train_pred, dev_pred = evaluate("train"), evaluate("dev")
        train_gold, dev_gold = data["train"].labels.numpy(), data["dev"].labels.numpy()
        record = {"run": args.run_name, "dataset": name, "epoch": epoch, **stats, "train_acc": accuracy(train_pred, train_gold),
                  "dev_acc": accuracy(dev_pred, dev_gold), "dev_f1": macro_f1(dev_pred, dev_gold)}
        if stopper.update(record["dev_acc"], epoch):
            save_checkpoint(paths.best, {"model": trainable_state(model), "args": vars(args), "epoch": epoch})
        save_checkpoint(paths.last, {"model": trainable_state(model), "optimizer": optimizer.state_dict(),
                                     "scheduler": trainer.scheduler.state_dict(), "args": vars(args), "epoch": epoch,
                                     "stopper": stopper.state_dict(), "rng": rng_state()})
        append_jsonl(paths.log, record)
        set_interrupt_hint(f"{name} epoch {epoch} is saved in {paths.last}; continue with the same flags plus "
                           f"--resume --run_name {args.run_name}")
        print(f"{name} epoch {epoch}: train loss {stats['train_loss']:.3f}, train acc {record['train_acc']:.3f}, "
              f"dev acc {record['dev_acc']:.3f}, dev f1 {record['dev_f1']:.3f}, {stats['seconds']:.0f}s, "
              + (f"{stats['tokens_per_s']:.0f} tokens/s" if not frozen else "head on cached features"))
        if on_epoch is not None:
            on_epoch(epoch, record["dev_acc"])
        barrier()
        if stop_signal(stopper.should_stop):
            print(f"{name}: {stopper.reason('dev accuracy')}")
            append_jsonl(paths.log, {"run": args.run_name, "dataset": name, "stopped": stopper.reason("dev accuracy")})
            break

    if not is_main():
        return None
    best = load_checkpoint(paths.best)
    load_trainable_state(model, best["model"], paths.best)
    merge_for_inference(model.bert, args, main_print)
    dev_pred, test_pred = evaluate("dev", keep_scores=True), evaluate("test")
    dev_acc = accuracy(dev_pred, data["dev"].labels.numpy())
    write_predictions(paths.dev, name, data["dev"].ids, dev_pred)
    write_predictions(paths.test, name, data["test"].ids, test_pred)
    print(f"{name}: best epoch {best['epoch']}, dev accuracy {dev_acc:.3f}; run folder {args.run_dir} "
          f"(checkpoint {paths.best.name}, log {paths.log.name})")
    publish([(paths.dev, paths.published["dev"]), (paths.test, paths.published["test"])], args.run_name, args.run_dir)
    return {"dataset": name, "dev_acc": dev_acc, "best_epoch": best["epoch"]}


# Flags that must agree between an interrupted run and its resumption.
RUN_DEFINING = {k: "--" + k for k in ("lr", "batch_size", "hidden_dropout_prob", "seed", "pretrained", "max_length",
                                      "grad_accum", "weight_decay", "epochs", "scheduler", "warmup_ratio",
                                      "max_grad_norm", "llrd", "head_lr", "smart_weight", "patience",
                                      "lora_dropout")} | ADAPTER_FLAGS | {"fine_tune_mode": "--fine-tune-mode",
                                                                         "bucket": "length bucketing (--no_bucket)"}


def main(argv=None, on_epoch=None):
    args = get_args(argv)
    device = get_device(args.use_gpu)
    setup_precision(args, device, log=main_print)
    check_max_length(args.max_length, args.pretrained)
    args.run_dir = run_folder(args, "classifier", args.checkpoint_dir, resumable=lambda d: any(d.glob("*-last.pt")))
    stems = [f"{args.fine_tune_mode}-{n}" for n in args.datasets]
    check_outputs(dirs=[args.run_dir, args.predictions_dir],
                  files=[Path(args.predictions_dir) / f"{s}-{x}-out.csv" for s in stems for x in ("dev", "test")])
    set_interrupt_hint(None)
    main_print(f"fine-tune mode {args.fine_tune_mode}, lr {args.lr}, {args.pretrained} on {device}"
               + (f", {distributed()[1]} processes" if distributed()[1] > 1 else ""))
    results = []
    for name in args.datasets:
        t0 = time.perf_counter()
        results.append(run_dataset(args, name, device, on_epoch))
        main_print(f"{name}: {(time.perf_counter() - t0) / 60:.1f} minutes")
    return results


if __name__ == "__main__":
    main_guard(main)
