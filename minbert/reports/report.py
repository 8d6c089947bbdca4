"""report.md of one or more runs (results, learning curves, per-task diagnostics), and the ranked view of a
results table; every file goes into --out through OutFolder, which never replaces a file no report wrote."""
import csv
import math
import os
import tempfile
from pathlib import Path

from minbert.cli import MinbertError, set_interrupt_hint
from minbert.files import check_writable, read_text, require_file, what_is_there
from minbert.project_paths import run_folder_of
from minbert.reports.figures import (PANELS, TITLES, plot_confusion, plot_curves, plot_quora, plot_results,
                                     plot_sts, worst_examples)
from minbert.reports.read import ONE_DATASET, Run, load_scores, logs_of
from minbert.runs.logs import read_log
from minbert.runs.folders import recorded_flags
from minbert.runs.lock import still_running
from minbert.runs.outputs import Output, check_replace
from minbert.runs.publishing import backup_line, copier, finish_publishing, place
from minbert.runs.sources import check_record

def _md_escape(text, limit=160):
    text = text if len(text) <= limit else text[:limit - 1] + "…"
    return text.replace("|", "\\|").replace("\n", " ")


def report(targets, out_dir, backup=False, out_given=True):
    """report.md and the figures of `targets` (runs, checkpoints or logs) in `out_dir`; `out_given`: whether
    the user typed --out (else `out_dir` is its default, and messages name it by its path)."""
    logs = [log for t in targets for log in logs_of(t)]
    twice = next((log for i, log in enumerate(logs) if Path(log).resolve() in {Path(x).resolve() for x in logs[:i]}),
                 None)
    if twice is not None:
        raise MinbertError(f"{twice}: given twice (a run, its checkpoint or its log each stand for it); each run is "
                           "reported once")
    runs = [Run(log, read_log(log)) for log in logs]
    out = OutFolder(out_dir, own={run_folder_of(r.folder) for r in runs}, backup=backup, given=out_given)
    md = [f"# Run report: {', '.join(r.name for r in runs)}", ""]
    written = []
    md += ["## Results (best dev epoch of each run)", ""]
    # which runs train still (a model that wrote its dev scores has ended, though the run's next may be training)
    running = {r.log: "" if r.scores else still_running(r.folder) for r in runs}
    md += ["| run | kind | best epoch | epochs "
           "| dev scores | training minutes |", "|---|---|---|---|---|---|"]
    for r in runs:
        if running[r.log]:
            print(f"note: {r.name} is still training ({running[r.log]}): its report holds the epochs it has "
                  "logged")
        epoch, rec = r.best
        minutes = sum(x.get("seconds", 0) for x in r.records) / 60
        if rec is None:
            md.append(f"| {r.name} | {r.kind} | none | {len(r.trained)} | every dev score is NaN: the run "
                      f"diverged (a learning rate too high?) | {minutes:.1f} |")
            print(f"{r.log}: every dev score is NaN (the run diverged); its curves show the epochs it ran")
            continue
        d = rec["dev"]
        if r.kind == "multitask":
            scores = (f"SST {d['sst']:.3f}, Quora {d['quora']:.3f}, STS r {d['sts']:.3f}, "
                      f"mean {rec['dev_score']:.3f}")
        elif r.kind in ONE_DATASET:
            scores = f"{r.dataset} accuracy {d['accuracy']:.3f}, macro-F1 {d.get('f1') or float('nan'):.3f}"
        elif r.kind == "gpt2-sonnet":
            scores = f"true dev sonnets' perplexity {d['perplexity']:.2f}"
        else:
            scores = f"held-out masked-token accuracy {d['masked_acc']:.3f}"
        so_far = " so far (still training)" if running[r.log] else ""
        md.append(f"| {r.name} | {r.kind} | {epoch} | {len(r.trained)}{so_far} | {scores} | {minutes:.1f} |")
    md += [""]
    for kind in PANELS:
        group = [r for r in runs if r.kind == kind]
        if not group:
            continue
        name = f"curves-{kind}.png"
        title = f"{TITLES[kind]} learning curves"
        if len(group) == 1:
            title += f": {group[0].name}"
        written.append(plot_curves(group, out.file(name), title))
        md += [f"## {title}", "", f"![learning curves]({name})", ""]
    for i, r in enumerate(runs):
        if r.kind == "gpt2-sonnet":  # no dev scores: its dev outputs are sonnets
            dev = r.folder / "generated_sonnets_dev.txt"
            md += [f"## {r.name}: dev completions", "",
                   f"The best epoch's completions of the held-out dev sonnets: {dev}" if dev.is_file() else
                   f"No {dev.name} beside {r.log}: the run did not finish.", ""]
            continue
        if not r.scores:
            md += [f"## {r.name}: no dev scores", "",
                   f"No `*-dev-scores.npz` beside {r.log}: " + ("the run is still training; it writes them when "
                                                                "it ends." if running[r.log] else
                                                                "the run predates them, or did not finish."), ""]
            continue
        slug = f"run{i + 1}"
        md += [f"## {r.name}: dev diagnostics", ""]
        for task, path in r.scores.items():
            try:
                s = load_scores(path)
            except MinbertError as e:  # one damaged file costs its own section, not the report
                print(f"warning: {e}; its figures are left out")
                md += [f"### {task.upper()}: left out", "", f"{e}", ""]
                continue
            if task == "sts":
                fig, stats = plot_sts(s, r.name, out.file(f"{slug}-sts.png"))
                md += [f"### STS: Pearson r {stats['pearson']:.3f}", "", f"![STS scatter]({fig.name})", ""]
            elif task == "quora":
                fig, stats = plot_quora(s, r.name, out.file(f"{slug}-quora-pr.png"))
                md += [f"### Quora: accuracy {stats['accuracy']:.3f}, "
                       f"F1 {stats['f1']:.3f} at threshold 0.5", "",
                       f"![Quora precision-recall]({fig.name})", ""]
            else:
                fig, _ = plot_confusion(s, r.name, task, out.file(f"{slug}-{task}-confusion.png"))
                md += [f"### {task.upper()}: confusion matrix", "", f"![{task} confusion]({fig.name})", ""]
            written.append(fig)
            md += ["Most wrong dev "
                   f"examples ({task}):", "", "| id | text | gold | predicted |", "|---|---|---|---|"]
            worst = worst_examples(s, task)
            md += [f"| {e['id'][:10]} | {_md_escape(e['text'])} | {e['gold']} | {e['predicted']} |" for e in worst]
            md += ([""] if worst else ["", "None: every labelled dev example is predicted right.", ""])
    out.file("report.md").write_text("\n".join(md) + "\n")
    out.close()
    md_path, written = out.final("report.md"), [out.final(f) for f in written]
    print(f"report written: {md_path} with {len(written)} figures in {out.path}")
    return md_path, written


# ----------------------------------------------------------------------------- the results table

class OutFolder:
    """--out, the folder report.py writes into (made; a file in its place is one line). `file(name)` claims a
    file by the output rule (runs/outputs.py): one there that no run and no report wrote (or that changed
    since) stops the report in one line, or with --backup is kept as a dated backup. What is written goes to a
    temporary folder first, and `close()` puts it all in place and records it together (runs/publishing.py),
    so a report interrupted half way leaves --out as it was; `final(path)` is where a claimed file ends up.
    `given`: whether the user typed --out; a default folder is named by its path alone, --out offered instead.
    `own`: the run folders a report is about, which it may write into; None for a comparison, which writes into
    no run's folder."""

    def __init__(self, out, own=(), backup=False, given=True):
        self.path, self.written, self.backup, self.given = Path(out), [], backup, given
        name, elsewhere = self._output(self.path)
        another = "name another folder" if given else elsewhere
        for p in (self.path, *self.path.parents):
            if p.is_symlink() and not p.exists():
                raise MinbertError(f"{name}: {p} is a link to {os.readlink(p)}, which does not exist: "
                                   f"remove the link, or {another}")
            if p.exists() and not p.is_dir():
                raise MinbertError(f"{name}: {p} is {what_is_there(p)}; report.py writes a folder of figures there: move "
                                   f"it or {another}")
        folder = run_folder_of(self.path)  # a report may go into the folder of a run it reports on, no other
        if folder is not None and own is None:  # a comparison: into no run's folder, the compared ones' neither
            raise MinbertError(f"{name}: inside {folder}, a run's folder, whose files belong to its checkpoint "
                               f"and log; a comparison is about several runs and goes into none of their folders: "
                               f"{another} outside it (default: reports/)")
        if folder is not None and folder not in own:
            raise MinbertError(f"{name}: inside {folder}, the folder of a run this report is not "
                               "about, whose files belong to its checkpoint and "
                               f"log: {another} outside it (default: reports/)")
        check_writable(self.path, name)
        if self.path.is_dir():  # what a report writes (report.md, *.png, results.md) is checked before any is
            check_record(self.path)
            finish_publishing([self.path])
            for path in sorted(self.path.glob("*.md")) + sorted(self.path.glob("*.png")):
                said, elsewhere = self._output(path)
                check_replace(said, path, backup, elsewhere)
        self.staging = tempfile.TemporaryDirectory(prefix="minbert-report-")
        set_interrupt_hint(None)  # an earlier folder's "written whole" is not this one's

    def _output(self, path):
        """(how a message names `path`, what it offers instead): runs/outputs.py's Output of --out."""
        out = Output("--out", path, self.given, "DIR")
        return out.name, out.elsewhere

    def file(self, name):
        path = self.path / name
        said, elsewhere = self._output(path)
        check_replace(said, path, self.backup, elsewhere)
        self.written.append(path)
        return Path(self.staging.name) / name

    def final(self, path):
        return self.path / Path(path).name

    def close(self):
        try:
            kept = place([(p, copier(Path(self.staging.name) / p.name)) for p in self.written
                          if (Path(self.staging.name) / p.name).is_file()], "report.py", self.path)
        finally:
            self.staging.cleanup()
        # what is left is printing: a Ctrl-C from here on stops no writing
        names = ", ".join(p.name for p in self.written)
        set_interrupt_hint(f"{names} in {self.path}/ were written whole before the interrupt took effect")
        if kept:
            print(backup_line(kept))


def read_results(path):
    path = Path(path)
    require_file(path, f"--results {path}", "results table (CSV)")
    lines = read_text(path, "results table (CSV)").splitlines()
    if not lines:
        raise MinbertError(f"{path}: the file is empty, not a results table (multitask_classifier.py --results "
                           "writes one, a row a run)")
    header = next(csv.reader(lines[:1]), [])
    if "mean" not in header or "run" not in header:
        raise MinbertError(f"{path}: not a results table (its header is {','.join(header)[:60]!r}, without the run "
                           "and mean columns multitask_classifier.py --results writes)")
    rows = list(csv.DictReader(lines))
    if not rows:
        raise MinbertError(f"{path}: no runs in the results table")
    seen = {}
    for n, row in enumerate(rows, start=2):
        try:
            row["mean"] = float(row["mean"])
        except (KeyError, TypeError, ValueError):
            raise MinbertError(f"{path}: line {n}: no numeric 'mean' column (truncated row?)") from None
        if not (math.isnan(row["mean"]) or 0.0 <= row["mean"] <= 1.0):  # NaN: a run that diverged
            raise MinbertError(f"{path}: line {n}: mean {row['mean']:g} is no dev mean (SST and Quora accuracy "
                               "and (STS r + 1) / 2 each lie in 0 to 1)")
        key = tuple(sorted((k, str(v)) for k, v in row.items()))
        if key in seen:
            raise MinbertError(f"{path}: line {n} repeats line {seen[key]} (run {row.get('run')}): each run is "
                               "ranked once")
        seen[key] = n
    return rows


def ranked(rows):
    """Best mean first; a row whose mean is not a number (nan: a run that diverged) goes last."""
    return sorted(rows, key=lambda r: (math.isnan(r["mean"]), -r["mean"] if not math.isnan(r["mean"]) else 0))


DEV_FILES = ("--sst_dev", "--para_dev", "--sts_dev")


def comparable(rows, table):
    """Notes on what the ranking mixes: runs from more than one checkpoint, or (by their run folders' recorded
    inputs, runs/NAME beside the table's folder or the current one) scored on other dev data; and which runs
    could not be checked."""
    notes = []
    pretrained = sorted({r.get("pretrained", "") for r in rows} - {""})
    if len(pretrained) > 1:
        notes.append(f"the runs start from {len(pretrained)} checkpoints ({', '.join(pretrained[:4])}"
                     f"{', ...' if len(pretrained) > 4 else ''}): their means compare checkpoints as much as runs")
    dev, unknown = {}, []
    for r in rows:
        folder = next((f for f in (Path(table).resolve().parent.parent / "runs" / r["run"], Path("runs") / r["run"])
                       if f.is_dir()), None)
        flags = recorded_flags(folder) if folder is not None else None
        if not flags:
            unknown.append(r["run"])
            continue
        inputs = flags.get("inputs") or {}
        dev.setdefault(tuple((inputs.get(f) or {}).get("sha256") for f in DEV_FILES), []).append(r["run"])
    if len(dev) > 1:
        groups = "; ".join(", ".join(runs[:3]) + (" ..." if len(runs) > 3 else "")
                           for runs in sorted(sorted(g) for g in dev.values()))
        notes.append(f"the runs were scored on {len(dev)} different dev sets (by their files' contents: {groups}): "
                     "their means are not comparable across those groups")
    if unknown:
        notes.append(f"{len(unknown)} run(s) ({', '.join(unknown[:3])}{' ...' if len(unknown) > 3 else ''}) have no "
                     "run folder under runs/ here recording their flags, so their dev data could not be checked")
    return notes


def results_view(path, out, backup=False, out_given=True):
    rows = ranked(read_results(path))
    cols = ["run", "training", "pair_encoding", "pretrained", "lr", "epochs", "seed", "sst_acc", "quora_acc",
            "sts_r", "mean", "best_epoch", "minutes"]
    cols = [c for c in cols if c in rows[0]]
    table = [[str(i + 1)] + [f"{r[c]:.4f}" if c == "mean" else str(r.get(c, "")) for c in cols]
             for i, r in enumerate(rows)]
    header = ["rank"] + cols
    widths = [max(len(h), *(len(t[j]) for t in table)) for j, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for t in table:
        print("  ".join(v.ljust(w) for v, w in zip(t, widths)))
    for note in comparable(rows, path):
        print(f"note: {note}")
    out = OutFolder(out, backup=backup, given=out_given)
    names = [r.get("run") or f"row {i + 1}" for i, r in enumerate(rows)]
    fig_path = plot_results(names, [r["mean"] for r in rows], f"Runs in {Path(path).name}, best first",
                            out.file("results.png"))
    out.close()
    fig_path = out.final(fig_path)
    print(f"bar chart written: {fig_path}")
    return rows, fig_path
