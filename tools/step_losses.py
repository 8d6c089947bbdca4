"""The loss of each step of Part 1's training (full model, SST, length-bucketed batches, AdamW at lr 1e-5),
for checking that a change to the training step keeps its numbers: run it on two checkouts (--repo) with the
same seed and compare the files (--against).

    python tools/step_losses.py --amp bf16 --seed 1 --out new.json --no_fast_dropout
    python tools/step_losses.py --repo ../old-checkout --amp bf16 --seed 1 --out old.json --against new.json

With --no_fast_dropout and --no_fused the step draws its dropout masks and updates its weights as before those
paths existed, so the losses compare step for step; with the bulk dropout masks (the default) they are other
random draws, and only their mean compares. RESULTS.md, "Speed", gives what it found.
"""
import inspect
import json
import os
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if not __package__:  # run as a file (python tools/NAME.py): the project folder first, not tools/
    sys.path.insert(0, str(REPO))

# the parser and the one-line error of this checkout (no torch); step_losses forgets them before it imports
# the checkout it runs
from minbert.cli import MinbertError, Parser, main_guard  # noqa: E402
from minbert.flags.types import positive_int, seed, token_length  # noqa: E402
# The protocol's own settings, fixed so that two checkouts run the same steps: not the project's defaults, which
# may change between the checkouts compared (and which an older checkout may not declare).
LENGTH, BATCH, LR = 128, 32, 1e-5


def build_parser():
    ap = Parser(prog="tools/step_losses.py", description="Per-step losses of Part 1's training step.")
    ap.add_argument("--repo", default=str(REPO), help="the checkout whose code runs (default: this one)")
    ap.add_argument("--pretrained", default="all-minilm-l6-v2")
    ap.add_argument("--data_dir", default="data")
    ap.add_argument("--amp", choices=["none", "bf16", "fp16"], default="none")
    ap.add_argument("--seed", type=seed, default=1)
    ap.add_argument("--steps", type=positive_int, default=50)
    ap.add_argument("--batch_size", type=positive_int, default=BATCH)
    ap.add_argument("--max_length", type=token_length, default=LENGTH, help="at least 2: [CLS] and [SEP]")
    ap.add_argument("--no_fast_dropout", action="store_true", help="torch's dropout masks "
                                                                   "(where the checkout has both)")
    ap.add_argument("--no_fused", action="store_true", help="the multi-tensor AdamW "
                                                            "(where the checkout has both)")
    ap.add_argument("--out", required=True, help="the JSON file written: the settings and the losses")
    ap.add_argument("--against", help="a file this tool wrote: print the "
                                      "largest per-step difference and the means")
    return ap


def step_losses(args):
    """The per-step training losses, computed with the code of args.repo. Imported here, from
    there, and nothing of this checkout's imported before: the other checkout's modules must find
    their own `utils`, `bert`, ..."""
    if Path(args.repo).resolve() != REPO:  # another checkout: its modules, not this one's already imported
        sys.path.insert(0, str(Path(args.repo).resolve()))
        for name in [m for m in sys.modules if m == "minbert" or m.startswith("minbert.")]:
            del sys.modules[name]  # this checkout's minbert.cli, parsed with: the other checkout has its own
    import torch
    from bert import BertModel
    from config import BertConfig
    from datasets import TaskData, batch_indices
    from minbert.course_data import data_file, read_examples
    from minbert.objectives.losses import ClassificationLoss
    from minbert.precision import autocast
    from minbert.specs import ModelSpec
    from minbert.tasks.sentiment import BertSentimentClassifier
    from optimizer import AdamW
    from tokenizer import BertTokenizer
    from minbert.hub import resolve_pretrained
    from utils import to_device
    tokenizer = BertTokenizer(resolve_pretrained(args.pretrained).vocab)
    examples = read_examples(data_file(args.data_dir, "sst", "train"), "sst", "train", log=lambda *_: None)
    data = TaskData(examples, "sst", tokenizer, max_length=args.max_length)
    batches = batch_indices(data.lengths, args.batch_size, shuffle=True, seed=args.seed,
                            bucket=True)[:args.steps]
    torch.manual_seed(args.seed)
    # Older checkouts have neither switch: only pass what this one's signatures take.
    extra = {"fast_dropout": not args.no_fast_dropout} if hasattr(BertConfig, "fast_dropout") else {}
    bert = BertModel.from_pretrained(args.pretrained, attn_impl="sdpa", **extra)
    spec = ModelSpec(pipeline="classifier", fine_tune_mode="full-model", dropout=[0.3], num_labels=5)
    model = BertSentimentClassifier(spec, bert=bert).train()
    extra = {"fused": not args.no_fused} if "fused" in inspect.signature(AdamW).parameters else {}
    opt = AdamW([p for p in model.parameters() if p.requires_grad], lr=LR, weight_decay=0.01, **extra)
    loss_fn, device, losses = ClassificationLoss(), torch.device("cpu"), []
    for i in batches:
        with autocast(device, args.amp):
            loss = loss_fn(model, to_device(data.batch(i), device))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses


def compare(losses, other):
    """{"max_abs", "max_rel", "mean", "other_mean"}: step-for-step differences and the two means."""
    pairs = list(zip(losses, other))
    return {"max_abs": max(abs(a - b) for a, b in pairs),
            "max_rel": max(abs(a - b) / abs(b) for a, b in pairs),
            "mean": statistics.mean(losses), "other_mean": statistics.mean(other)}


def read_record(path, flag):
    """The JSON record this tool wrote at `path` (its settings and a list of losses), or None for a file of
    anything else; a file that cannot be read is one line."""
    try:
        record = json.loads(Path(path).read_text())
    except OSError as e:  # no permission, say
        raise MinbertError(f"{flag} {path}: cannot read it: {e.strerror or e}") from None
    except (ValueError, UnicodeDecodeError):
        return None
    ours = (isinstance(record, dict) and {"losses", "seed", "steps", "amp"} <= set(record)
            and isinstance(record["losses"], list) and record["losses"])
    return record if ours else None


def check_out(path):
    """--out replaces only a file this tool wrote (a JSON record holding "losses"); anything else
    is one line. (This tool may import another checkout's minbert, so it keeps the output rule
    here rather than import it; its MinbertError is this checkout's, which main_guard catches.)"""
    path = Path(path)
    if path.is_dir():
        raise MinbertError(f"--out {path}: is a folder; name the JSON file to write")
    if path.is_symlink() or path.exists() and not path.is_file():  # minbert/project_paths.py's rule, kept here
        raise MinbertError(f"--out {path}: is a link, a named pipe or a device, not a regular file; "
                           "name another path")
    if path.exists() and read_record(path, "--out") is None:
        raise MinbertError(f"--out {path}: holds a file this tool did not write, which would be "
                           "lost: move it or name another path")


def read_against(path):
    """--against's record, read before the steps run (a missing or foreign file is one line, not a traceback
    after minutes of work)."""
    path = Path(path)
    if not path.is_file():
        raise MinbertError(f"--against {path}: " + ("is a folder" if path.is_dir() else "no such file")
                           + "; give a JSON file this tool wrote with --out")
    record = read_record(path, "--against")
    if record is None:
        raise MinbertError(f"--against {path}: not a record this tool wrote (no list of losses in JSON); give a "
                           "file written by its --out")
    return record


def differences(args, record):
    """The settings (other than the checkout, the files and the switches of two paths compared on purpose)
    under which --against's losses were taken and this run's differ, as 'FLAG VALUE (this run: VALUE)'."""
    mine = {k: v for k, v in vars(args).items() if k not in ("out", "against", "repo", "no_fast_dropout", "no_fused")}

    def same(k, a, b):  # a folder or file named two ways (relative, absolute) is the same one
        return a == b or k in ("data_dir", "pretrained") and Path(a).exists() and Path(a).resolve() == Path(b).resolve()
    return [f"--{k} {record[k]} (this run: {v})" for k, v in mine.items() if k in record and not same(k, record[k], v)]


def write_out(path, text):
    """Write --out through a new file beside it and a rename, so that an interrupted write never leaves half a
    record (which the next run would refuse as not this tool's) and no file of another name is replaced."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "w") as fp:
            fp.write(text)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def main(argv=None):
    args = build_parser().parse_args(argv)
    repo = Path(args.repo)
    if not (repo / "minbert").is_dir() or not (repo / "bert.py").is_file():  # else this checkout's code runs
        raise MinbertError(f"--repo {args.repo}: " + ("no such folder" if not repo.exists() else
                                                      "not a checkout of this project (no minbert/ and bert.py in "
                                                      "it)"))
    if args.against and os.path.realpath(args.against) == os.path.realpath(args.out):
        raise MinbertError(f"--out {args.out}: is the --against file, which this run reads; writing there would "
                           "replace the reference: name another --out")
    check_out(args.out)
    other = read_against(args.against) if args.against else None
    try:
        losses = step_losses(args)
    except Exception as e:  # another checkout's one-line error is its own class, which main_guard would not know
        if type(e).__name__ != "MinbertError" or isinstance(e, MinbertError):
            raise
        raise MinbertError(f"--repo {args.repo}: {e}") from None
    record = {k: v for k, v in vars(args).items() if k not in ("out", "against")} | {"losses": losses}
    write_out(args.out, json.dumps(record, indent=1) + "\n")
    print(f"{args.out}: {len(losses)} steps, mean loss {statistics.mean(losses):.5f}")
    if other is not None:
        c = compare(losses, other["losses"])
        print(f"against {args.against}: largest difference {c['max_abs']:.2e} ({c['max_rel']:.2e} relative); "
              f"mean {c['mean']:.5f} against {c['other_mean']:.5f}")
        changed = differences(args, other)
        if changed:
            print(f"note: {args.against} was taken with {'; '.join(changed)}: its steps are other steps, and "
                  "only a change of code compares step for step")
    return losses


if __name__ == "__main__":
    main_guard(main)
