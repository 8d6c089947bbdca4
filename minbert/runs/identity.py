"""Which flags define a run, and refusing to resume a run with other ones.

A run's checkpoints record the flags that define it (every flag but those in RUN_FREE, which only say where
files go or how fast the same computation runs) and the sha256 of every file it reads. `--resume` compares
them with the command that resumes it: another value, or an input file with other bytes, is one line naming
each difference; an input found at a new path with the same bytes (a data folder moved) is accepted.
"""
from pathlib import Path

from minbert.cli import MinbertError, flag_spelling
from minbert.files import file_digest, plain
from minbert.hub import resolve_pretrained

# Flags that may differ between an interrupted run and its resumption: where files go, which device, and
# how fast the same computation runs. Every other flag defines the run.
RUN_FREE = {"use_gpu", "amp", "attn", "pad_multiple", "compile", "record_step", "foreach", "fused",
            "fast_dropout", "resume", "run_name", "run_dir", "checkpoint",
            "checkpoint_name", "predictions_dir", "results", "eval_only", "merge", "tensorboard", "backup",
            "datasets", "out", "sonnet_out"} | {f"{p}_{s}_out" for p in ("sst", "para",
                                                                         "sts") for s in ("dev", "test")}
# Flags naming the files a run reads. Where they are may change (a data folder moved or copied); what they
# hold may not: a run records its inputs' sha256 (run_defining's `inputs`), and a resumption compares those.
PATH_FLAGS = {"data_dir", "texts", "extra_task", "distill"} | {f"{p}_{s}" for p in ("sst", "para", "sts")
                                                                 for s in ("train", "dev", "test")} | {
    # gpt2/sonnet_generation.py's
    "sonnet_path", "held_out_sonnet_path", "held_out_dev_path", "true_dev_path"}
# What a tool that runs a pipeline changes beyond its flags ({name: value}: tools/layernorm_rate.py's factor),
# recorded as defining the run as a flag is: --resume, report.py --compare and a sweep's --baseline then tell
# such a run from a plain one.
TOOL_SETTINGS = {}


def defining_flags(values):
    """The run-defining part of {flag destination: value} (all parsed flags, with the defaults that depend on
    the machine or the checkpoint resolved), as plain values, and TOOL_SETTINGS."""
    return {**{k: plain(v) for k, v in sorted(values.items()) if k not in RUN_FREE | PATH_FLAGS}, **TOOL_SETTINGS}


def run_defining(flags, inputs=None):
    """`flags` (defining_flags) with, under "inputs", the sha256 of each file the run reads ({what: path} in
    `inputs`). A --pretrained that is a local folder counts by its files' contents too (the folder may move);
    a hub or packaged name counts as the name."""
    flags, inputs = dict(flags), dict(inputs or {})
    if "pretrained" in flags and Path(flags["pretrained"]).is_dir():
        ckpt = resolve_pretrained(flags.pop("pretrained")).require("config", "weights")
        inputs.update({"--pretrained config.json": ckpt.config, "--pretrained weights": ckpt.weights})
        # the tokenizer's files: BERT's vocab.txt, GPT-2's vocab.json and merges.txt
        inputs.update({f"--pretrained {f}": ckpt.folder / f for f in ("vocab.txt", "vocab.json", "merges.txt")
                       if (ckpt.folder / f).is_file()})
    flags["inputs"] = {what: {"path": str(path), "sha256": file_digest(path)} for what,
                       path in sorted(inputs.items())}
    return flags


def check_same_run(saved, now, source, log=print):
    """Refuse to resume a run whose run-defining flags (`saved`) differ from this one's (`now`), naming each
    difference, or whose input files hold other bytes than the ones it was trained on. An input found at a
    new path with the same bytes (a data folder moved or copied) is said in one line and accepted. A
    checkpoint of an earlier minbert, which recorded paths rather than contents, is not held to its paths."""
    keys = (set(saved) | set(now)) - RUN_FREE - PATH_FLAGS - {"inputs"}

    def differs(k):  # a --no_X switch stores X as True when it was not given
        if flag_spelling(k).startswith("--no_"):
            return (f"{flag_spelling(k)} {'not given' if saved.get(k) else 'given'} in the checkpoint's run, "
                    f"{'not given' if now.get(k) else 'given'} now")
        return f"{flag_spelling(k)} {saved.get(k)!r} in the checkpoint, {now.get(k)!r} given"
    foreign = sorted(k for k in keys if k not in now)  # flags this command does not take at all
    diff = [differs(k) for k in sorted(keys) if k not in foreign and saved.get(k) != now.get(k)]
    if foreign:
        diff.append("the checkpoint's run was started by a command with flags this one does not take ("
                    + ", ".join(flag_spelling(k) for k in foreign[:4]) + (", ..." if len(foreign) > 4 else "")
                    + "): another script's, or an earlier minbert's")
    was, new = saved.get("inputs") or {}, now.get("inputs") or {}
    if was:  # an earlier minbert recorded no inputs
        diff += [f"the run read {what} ({was[what]['path']}), this one does not"
                 for what in sorted(set(was) - set(new))]
        diff += [f"this run reads {what} ({new[what]['path']}), the checkpoint's did not"
                 for what in sorted(set(new) - set(was))]
    moved = []
    for what in sorted(set(was) & set(new)):
        if was[what]["sha256"] != new[what]["sha256"]:
            diff.append(f"the {what} file {new[what]['path']} holds other contents "
                        f"than {was[what]['path']}, which the run was trained on")
        elif was[what]["path"] != new[what]["path"]:
            moved.append(f"{was[what]['path']} -> {new[what]['path']}")
    if diff:
        raise MinbertError(f"{source}: cannot resume, the checkpoint comes from another configuration: "
                           + "; ".join(diff))
    if moved:
        log(f"resuming with input files that moved, their contents unchanged: {', '.join(moved[:3])}"
            + (f" and {len(moved) - 3} more" if len(moved) > 3 else ""))
