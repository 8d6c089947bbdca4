"""What a checkpoint holds, and reading it without running code.

A checkpoint is a dict of tensors and plain values (str, int, float, bool, None, lists and dicts of
them), written atomically with torch.save and read with `torch.load(..., weights_only=True)`, so a
file from a teammate or the internet can hold weights and nothing that executes on load:

    format     "minbert-checkpoint", version 2
    pipeline   "classifier", "multitask" or "pretrain"
    spec       the model's architecture (specs.ModelSpec): everything needed to rebuild it
    model      the trained tensors (a frozen backbone is rebuilt from `spec.pretrained`)
    flags      the run-defining flags (runs/identity.py): a resumption must agree with them
    epoch, scores, run
    and, in the '-last' checkpoint a run resumes from: trainer (optimizer, scheduler, grad scaler),
    rng (python, numpy, torch), stopper (early stopping), pipeline_state (data order); in a file `save_model`
    wrote (the scripts' save_model, for a loop of one's own): rng and, when given, optimizer (its state_dict)

Checkpoints of the earlier format (the whole `args` namespace pickled, `pathlib` paths among them) are
read through the same restricted loader with only `pathlib`'s path classes allowed, and converted in
memory; `python tools/convert_checkpoint.py OLD.pt NEW.pt` writes the new format to disk.
"""
import pathlib
import random
from pathlib import Path

import numpy as np
import torch

from minbert.cli import MinbertError
from minbert.files import atomic_write, plain, special_file
from minbert.runs.outputs import check_outputs
from minbert.runs.publishing import place
from minbert.safe_load import refuse_code, safe_load
from minbert.specs import ModelSpec

FORMAT, VERSION = "minbert-checkpoint", 2


# ----------------------------------------------------------------------------- reading and writing

def save_checkpoint(path, obj):
    """Write `obj` (tensors and plain values) atomically: an interruption leaves the previous file."""
    return atomic_write(path, lambda fp: torch.save(obj, fp))


def model_record(pipeline, spec, model, epoch=0, scores=None, run="", model_name="model", flags=None):
    """The fields every checkpoint carries: the format, the pipeline that wrote it, the model's spec (None for
    pretrain.py's encoder) and trainable tensors, its run's and its own name, the epoch, dev scores and flags."""
    return {"format": FORMAT, "version": VERSION, "pipeline": pipeline,
            "spec": spec.to_dict() if spec is not None else None, "model": trainable_state(model), "epoch": epoch,
            "scores": scores or {}, "run": run, "model_name": model_name, "flags": flags or {}}


def save_model(path, model, optimizer=None, by="save_model"):
    """Write `model` (a task model holding its ModelSpec) to the file `path` as a run's best checkpoint holds
    it, with the random states and `optimizer`'s state beside it. A file outside a run's folder, so checked and
    recorded as written by `by` as every output is (runs/outputs.py); --eval_only reads it back."""
    check_outputs(files=[("save_model's filepath", path)])
    state = {**model_record(model.spec.pipeline, model.spec, model, run=by, model_name=Path(path).stem),
             "rng": rng_state()}
    if optimizer is not None:
        state["optimizer"] = optimizer.state_dict()
    place([(path, lambda fp: torch.save(state, fp))], by)
    return Path(path)


class _Legacy(Exception):
    pass


def load_checkpoint(path, map_location="cpu"):
    """The checkpoint at `path`, read without executing anything it holds; the earlier format is converted.
    Every problem is one MinbertError line naming the file."""
    path = Path(path)
    if not path.is_file() and (kind := special_file(path)):  # it exists: "not found" would mislead
        raise MinbertError(f"{path}: is {kind}, not a checkpoint file")
    if not path.is_file():
        raise MinbertError(f"{path}: checkpoint not found")
    state, culprit = safe_load(path, "checkpoint", map_location)
    if culprit is not None:
        if not culprit.startswith("pathlib."):
            raise refuse_code(path, culprit)
        state = _load_with_paths(path, map_location)  # the earlier format: its flags held pathlib paths
    if not isinstance(state, dict):
        raise MinbertError(f"{path}: not a minbert checkpoint (it holds a {type(state).__name__})")
    if state.get("format") == FORMAT:
        if state.get("version", 0) > VERSION:
            raise MinbertError(f"{path}: checkpoint version {state['version']} "
                               f"is newer than this minbert's {VERSION}")
        return state
    if "args" in state and "model" in state:
        return convert_legacy(state, path)
    if "args" in state and "optimizer" in state:  # the earlier pretrain.py state file
        raise MinbertError(f"{path}: an interrupted pretraining run of an earlier minbert; it cannot be "
                           "resumed by this one: start it again with a new --out")
    raise MinbertError(f"{path}: not a minbert checkpoint (no model and spec in it)")


def _load_with_paths(path, map_location):
    """The earlier format, read by the same restricted unpickler with pathlib's path classes allowed (building
    a path runs no code of the file's choosing)."""
    allowed = [pathlib.PosixPath, pathlib.WindowsPath, pathlib.PurePosixPath, pathlib.PureWindowsPath]
    state, culprit = safe_load(path, "checkpoint", map_location, allowed)
    if culprit is None:
        return state
    if culprit.startswith("numpy"):
        raise MinbertError(f"{path}: the resumable checkpoint of an earlier minbert (its random state is "
                           f"pickled NumPy); it cannot be resumed by this one: score its best checkpoint, "
                           f"or start the run again")
    raise refuse_code(path, culprit)


# What a setting was in the earlier format when its checkpoint does not record it: facts about the code that wrote
# those files, so written out here (today's defaults may change; those files do not).
LEGACY = {"multitask_dropout": 0.1, "classifier_dropout": 0.3, "fine_tune_mode": "full-model", "lora_rank": 8,
          "lora_alpha": 16.0, "lora_dropout": 0.0, "max_length": 128, "num_labels": 5, "pair_encoding": "cross",
          "pooling": "mean", "pals": False, "siamese_proj": 0}


def convert_legacy(state, source):
    """An earlier-format checkpoint ({'model', 'args': the whole namespace, 'epoch', ...}) in the new format."""
    old = state["args"]  # the earlier format: the flags of its run, as a dict
    if not isinstance(old, dict):
        raise MinbertError(f"{source}: not a minbert checkpoint (its 'args' is a {type(old).__name__})")
    multitask = "pair_encoding" in old
    task_dropout = old.get("task_dropout")
    dropout = ((task_dropout or [old.get("hidden_dropout_prob", LEGACY["multitask_dropout"])] * 3) if multitask
               else [old.get("hidden_dropout_prob", LEGACY["classifier_dropout"])])
    head = state["model"].get("classifier.weight")
    recorded = {k: old.get(k, LEGACY[k]) for k in ("fine_tune_mode", "lora_rank", "lora_alpha", "lora_dropout",
                                                   "max_length", "pair_encoding", "pooling")}
    spec = ModelSpec(pipeline="multitask" if multitask else "classifier", pretrained=str(old.get("pretrained")),
                     lora_targets=old.get("lora_targets"), dropout=dropout,
                     num_labels=int(head.shape[0]) if head is not None else LEGACY["num_labels"],
                     pals=bool(old.get("pals", LEGACY["pals"])), pals_dim=old.get("pals_dim"),
                     siamese_proj=old.get("siamese_proj", LEGACY["siamese_proj"]) or 0, **recorded)
    return {"format": FORMAT, "version": VERSION, "pipeline": spec.pipeline, "spec": spec.to_dict(),
            "model": state["model"], "epoch": state.get("epoch", 0),
            "scores": plain(state.get("scores") or {}),
            "run": str(old.get("run_name") or Path(source).parent.name), "flags": {},
            "converted_from": str(source)}


def read_spec(state, source, pipeline=None):
    """The ModelSpec of a loaded checkpoint, refusing one of another pipeline in one line."""
    if pipeline and state.get("pipeline") != pipeline:
        script = {"classifier": "classifier.py", "multitask": "multitask_classifier.py",
                  "pretrain": "pretrain.py"}
        raise MinbertError(f"{source}: not a {script[pipeline]} checkpoint (it was written by "
                           f"{script.get(state.get('pipeline'), 'something else')})")
    return ModelSpec.from_dict(state["spec"], source)


# ----------------------------------------------------------------------------- model tensors

def trainable_state(model):
    """The tensors a fine-tuning run changes: all parameters that require grad (a frozen backbone is
    rebuilt from its pretrained checkpoint, so it need not be saved every epoch)."""
    return {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}


def load_trainable_state(model, state, source):
    own = dict(model.named_parameters())
    bad = [k for k in state if k not in own or own[k].shape != state[k].shape]
    missing = [n for n, p in own.items() if p.requires_grad and n not in state]
    if bad or missing:
        saved_lora, own_lora = (any(".lora_" in k for k in names) for names in (state, own))
        hint = "" if saved_lora == own_lora else (
            "; the checkpoint holds LoRA/DoRA adapters and this model has none" if saved_lora
            else "; this model has adapters and the checkpoint none") + " (give its --fine-tune-mode)"
        raise MinbertError(f"{source}: checkpoint does not fit this model: "
                           + (f"unknown or mis-shaped {bad[:5]} " if bad else "")
                           + (f"missing {missing[:5]}" if missing else "") + hint)
    with torch.no_grad():
        for k, v in state.items():
            own[k].copy_(v)


# ----------------------------------------------------------------------------- random state

def rng_state():
    """Every random state a run draws from, as tensors and plain values: Python's, NumPy's global, torch's CPU
    generator, and each device generator the run has used (a GPU's dropout masks come from its CUDA generator,
    one per device; Apple's MPS has one)."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state = {"python": [version, list(internal), gauss],
             "numpy": [kind, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss),
                       float(cached)],
             "torch": torch.get_rng_state()}
    # a CPU run never starts CUDA to save nothing
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        state["mps"] = torch.mps.get_rng_state()
    return state


def set_rng_state(state):
    """Put back what rng_state saved. A device generator this machine lacks (a GPU run resumed on the CPU) is
    skipped: that run draws from the CPU generator, which is restored."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        saved = state["cuda"][:torch.cuda.device_count()]
        for device, generator in enumerate(saved):
            torch.cuda.set_rng_state(generator, device)
    if "mps" in state and getattr(torch.backends, "mps",
                                  None) is not None and torch.backends.mps.is_available():
        torch.mps.set_rng_state(state["mps"])
