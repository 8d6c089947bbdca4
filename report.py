"""See a run: learning curves, per-task diagnostics and an error sample, as PNGs and a report.md.

    python report.py runs/multitask-20261123-014501 [runs/OTHER ...] --out reports/NAME
    python report.py runs/NAME/multitask.pt           # a checkpoint: its run's log and scores
    python report.py runs/NAME/full-model-sst-log.jsonl
    python report.py --results predictions/multitask-results.csv [--out reports/results]

A run is read from the per-epoch JSON-lines log the pipelines write and, for the diagnostics, from the
`*-dev-scores.npz` files beside it (raw dev outputs; they stay in the run folder and never go into the
submission zip). Several runs given together are overlaid in the learning curves. Figures use the Agg
backend: no window ever opens.
"""
import csv
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from sklearn.metrics import f1_score, precision_recall_curve  # noqa: E402

from checkpoint import load_checkpoint  # noqa: E402
from evaluation import pearson  # noqa: E402
from flags import Parser  # noqa: E402
from runs import backup_line, protect, read_log, read_text, record, run_folder_of  # noqa: E402
from utils import MinbertError, main_guard  # noqa: E402

DPI = 150
# The panels of each pipeline's learning curves: (record field or dev metric, title, axis label).
PANELS = {
    "multitask": [("train_loss", "train loss", "loss (sum of task losses)"), ("sst", "SST dev accuracy", "accuracy"),
                  ("quora", "Quora dev accuracy", "accuracy"), ("sts", "STS dev Pearson r", "Pearson r"),
                  ("dev_score", "dev mean (leaderboard)", "mean of SST, Quora, (r + 1) / 2")],
    "classifier": [("train_loss", "train loss", "cross-entropy"), ("train_accuracy", "train accuracy", "accuracy"),
                   ("accuracy", "dev accuracy", "accuracy")],
    "pretrain": [("train_loss", "train loss", "masked-LM cross-entropy"),
                 ("masked_acc", "held-out masked-token accuracy", "accuracy"),
                 ("masked_loss", "held-out masked-LM loss", "cross-entropy")],
}
TITLES = {"multitask": "Multitask", "classifier": "Part 1", "pretrain": "Pretraining"}
SCORE_FILES = {"sst": "sst-dev-scores.npz", "quora": "para-dev-scores.npz", "sts": "sts-dev-scores.npz"}


# ----------------------------------------------------------------------------- reading runs

class Run:
    """One model's log records (the epoch protocol's schema, trainer.fit) and its dev score files."""

    def __init__(self, log_path, records):
        self.log, self.records = Path(log_path), records
        self.folder = self.log.parent
        self.kind = records[-1]["pipeline"]
        self.name = records[-1].get("run") or self.folder.name
        stem = self.log.name[:-len("-log.jsonl")] if self.log.name.endswith("-log.jsonl") else self.log.stem
        if self.kind == "classifier":
            self.dataset = records[-1].get("dataset") or stem.rsplit("-", 1)[-1]
            self.name = f"{self.name} ({self.dataset})"
            self.scores = {self.dataset: self.folder / f"{stem}-dev-scores.npz"}
        elif self.kind == "multitask":
            self.scores = {t: self.folder / f for t, f in SCORE_FILES.items()}
        else:
            self.scores = {}
        self.scores = {t: p for t, p in self.scores.items() if p.is_file()}
        self.trained = [r for r in records if r["epoch"] >= 0]  # pretraining logs its starting point as epoch -1

    def series(self, key):
        vals = [r.get(key, r.get("dev", {}).get(key)) for r in self.records]
        return [r["epoch"] for r in self.records], [np.nan if v is None else v for v in vals]

    @property
    def best(self):
        """(epoch, record) of the best dev score, the epoch the pipelines keep; (None, None) when no epoch has
        one (every dev score NaN: the run diverged)."""
        rows = self.trained or self.records
        scores = np.array([np.nan if r["dev_score"] is None else r["dev_score"] for r in rows], dtype=np.float64)
        if np.isnan(scores).all():
            return None, None
        i = int(np.nanargmax(scores))
        return rows[i]["epoch"], rows[i]


def logs_of(target):
    """The log files a command-line target names: a log, a checkpoint, or a run folder."""
    p = Path(target)
    if p.is_dir():
        logs = sorted(p.glob("*-log.jsonl")) + sorted(q for q in p.glob("*.jsonl") if not q.name.endswith("-log.jsonl"))
        if not logs:
            raise MinbertError(f"{p}: no run log (*.jsonl) in this folder")
        return logs
    if p.suffix == ".pt":
        state = load_checkpoint(p)  # read safely: a crafted file is refused here, in one line
        stem = state.get("model_name") or p.stem.removesuffix("-last")
        for log in (p.with_name(f"{stem}-log.jsonl"), p.with_name(f"{stem}.jsonl")):
            if log.is_file():
                return [log]
        raise MinbertError(f"{p}: no log beside this checkpoint ({stem}-log.jsonl)")
    if p.suffix == ".jsonl" or not p.exists():
        return [p]
    raise MinbertError(f"{p}: not a run folder, a checkpoint (.pt) or a log (.jsonl)")


def load_scores(path):
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as e:
        raise MinbertError(f"{path}: cannot read dev scores ({type(e).__name__}: {e})") from None


# ----------------------------------------------------------------------------- figures

def _save(fig, path, rect=(0, 0, 1, 1)):
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def plot_curves(runs, path, title):
    """One panel per metric, every run overlaid, the best epoch of each marked with a star."""
    panels = PANELS[runs[0].kind]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels), 3.4), squeeze=False)
    for ax, (key, name, unit) in zip(axes[0], panels):
        for i, run in enumerate(runs):
            epochs, vals = run.series(key)
            color = f"C{i % 10}"
            ax.plot(epochs, vals, marker="o", ms=3, color=color, label=run.name)
            best_epoch, _ = run.best
            if best_epoch is not None:
                j = epochs.index(best_epoch)
                ax.plot([best_epoch], [vals[j]], marker="*", ms=13, color=color, markeredgecolor="black",
                        linestyle="none")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("epoch")
        ax.set_ylabel(unit, fontsize=9)
        ax.grid(alpha=0.3)
        ax.xaxis.get_major_locator().set_params(integer=True)
    fig.suptitle(f"{title} (star: best dev epoch, the one kept)", fontsize=11)
    handles, labels = axes[0][0].get_legend_handles_labels()
    if len(runs) == 1:
        return _save(fig, path)
    fig.legend(handles, labels, loc="lower center", ncol=min(len(runs), 4), fontsize=8, frameon=False)
    return _save(fig, path, rect=(0, 0.08 + 0.04 * ((len(runs) - 1) // 4), 1, 1))  # room for the legend


def confusion(gold, pred, n):
    """n x n counts: rows are gold classes, columns predicted ones."""
    m = np.zeros((n, n), dtype=np.int64)
    for g, p in zip(gold.astype(int), pred.astype(int)):
        m[g, p] += 1
    return m


CLASS_NAMES = {5: ["0 neg", "1", "2 neutral", "3", "4 pos"], 2: ["0 neg", "1 pos"]}


def plot_confusion(s, run_name, task, path):
    labelled = ~np.isnan(s["gold"])
    n = s["output"].shape[-1]
    m = confusion(s["gold"][labelled], s["pred"][labelled], n)
    norm = m / np.maximum(m.sum(1, keepdims=True), 1)
    fig, axes = plt.subplots(1, 2, figsize=(9.5, 4.2))
    for ax, data, what, fmt in ((axes[0], m, "counts", "d"), (axes[1], norm, "row-normalised (recall per class)", ".2f")):
        im = ax.imshow(data, cmap="Blues")
        for i in range(n):
            for j in range(n):
                ax.text(j, i, format(data[i, j], fmt), ha="center", va="center", fontsize=8,
                        color="white" if data[i, j] > data.max() * 0.6 else "black")
        names = CLASS_NAMES.get(n, [str(i) for i in range(n)])
        ax.set_xticks(range(n), names, fontsize=8)
        ax.set_yticks(range(n), names, fontsize=8)
        ax.set_xlabel("predicted class")
        ax.set_ylabel("gold class")
        ax.set_title(what, fontsize=10)
        fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    acc = float(np.trace(m) / max(m.sum(), 1))
    fig.suptitle(f"{run_name}: {task.upper()} dev confusion matrix (accuracy {acc:.3f}, {int(m.sum())} sentences)",
                 fontsize=11)
    return _save(fig, path), m


def plot_quora(s, run_name, path):
    labelled = ~np.isnan(s["gold"])
    gold, logit = s["gold"][labelled].astype(int), s["output"][labelled]
    prob = 1 / (1 + np.exp(-logit.astype(np.float64)))
    pred = (logit > 0).astype(int)
    acc, f1 = float(np.mean(pred == gold)), float(f1_score(gold, pred))
    precision, recall, _ = precision_recall_curve(gold, prob)
    tp = int(((pred == 1) & (gold == 1)).sum())
    p_at, r_at = tp / max(int(pred.sum()), 1), tp / max(int(gold.sum()), 1)
    fig, ax = plt.subplots(figsize=(5.2, 4.4))
    ax.plot(recall, precision, color="C0", label="precision-recall curve")
    ax.plot([r_at], [p_at], marker="o", ms=8, color="C3", linestyle="none",
            label=f"threshold 0.5: accuracy {acc:.3f}, F1 {f1:.3f}")
    ax.axhline(gold.mean(), color="grey", ls="--", lw=1, label=f"chance (share of paraphrases {gold.mean():.2f})")
    ax.set_xlabel("recall (paraphrases found)")
    ax.set_ylabel("precision (paraphrase predictions right)")
    ax.set_xlim(0, 1.01)
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title(f"{run_name}: Quora dev paraphrase detection", fontsize=10)
    return _save(fig, path), {"accuracy": acc, "f1": f1}


STS_BINS = [0, 1, 2, 3, 4, 5.0001]


def plot_sts(s, run_name, path):
    labelled = ~np.isnan(s["gold"])
    gold, pred = s["gold"][labelled], s["pred"][labelled]
    r = pearson(pred, gold)
    bins = np.digitize(gold, STS_BINS[1:-1])
    mae = [float(np.abs(pred - gold)[bins == b].mean()) if (bins == b).any() else np.nan for b in range(5)]
    counts = [int((bins == b).sum()) for b in range(5)]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.4))
    ax = axes[0]
    ax.scatter(gold, pred, s=6, alpha=0.4, color="C0")
    ax.plot([0, 5], [0, 5], color="grey", ls="--", lw=1, label="perfect agreement")
    ax.set_xlabel("gold similarity (0-5)")
    ax.set_ylabel("predicted similarity (0-5)")
    ax.set_xlim(-0.1, 5.1)
    ax.set_ylim(-0.1, 5.1)
    ax.set_title(f"predicted vs gold (Pearson r {r:.3f}, {len(gold)} pairs)", fontsize=10)
    ax.legend(fontsize=8, loc="upper left")
    ax.grid(alpha=0.3)
    ax = axes[1]
    names = [f"{STS_BINS[b]:g}-{min(STS_BINS[b + 1], 5):g}" for b in range(5)]
    ax.bar(names, mae, color="C1")
    for i, (m, c) in enumerate(zip(mae, counts)):
        if not math.isnan(m):
            ax.text(i, m, f"n={c}", ha="center", va="bottom", fontsize=8)
    ax.set_xlabel("gold similarity bin")
    ax.set_ylabel("mean absolute error (similarity points)")
    ax.set_title("error per gold bin", fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    fig.suptitle(f"{run_name}: STS dev similarity", fontsize=11)
    return _save(fig, path), {"pearson": r, "mae_per_bin": dict(zip(names, mae))}


def worst_examples(s, task, k=5):
    """The k labelled dev examples the model got most wrong: the most confident wrong class (SST, CFIMDB,
    Quora), or the largest absolute error (STS)."""
    labelled = np.flatnonzero(~np.isnan(s["gold"]))
    gold, out = s["gold"][labelled], s["output"][labelled].astype(np.float64)
    if task == "sts":
        err = np.abs(s["pred"][labelled] - gold)
        shown = lambda i: f"{s['pred'][labelled][i]:.2f}"  # noqa: E731
    elif task == "quora":
        prob = 1 / (1 + np.exp(-out))
        err = np.abs(prob - gold)
        shown = lambda i: f"{int(prob[i] > 0.5)} (p={prob[i]:.2f})"  # noqa: E731
    else:
        probs = np.exp(out - out.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        err = 1 - probs[np.arange(len(gold)), gold.astype(int)]
        shown = lambda i: f"{int(probs[i].argmax())} (p={probs[i].max():.2f})"  # noqa: E731
    order = np.argsort(-err, kind="stable")[:k]
    rows = []
    for i in order:
        j = labelled[i]
        text = s["text1"][j] + (f" ||| {s['text2'][j]}" if s["text2"][j] else "")
        rows.append({"id": str(s["ids"][j]), "text": str(text), "gold": f"{gold[i]:g}", "predicted": shown(i),
                     "error": float(err[i])})
    return rows


# ----------------------------------------------------------------------------- the report

def _md_escape(text, limit=160):
    text = text if len(text) <= limit else text[:limit - 1] + "…"
    return text.replace("|", "\\|").replace("\n", " ")


def report(targets, out_dir):
    runs = [Run(log, read_log(log)) for t in targets for log in logs_of(t)]
    out = OutFolder(out_dir, own={run_folder_of(r.folder) for r in runs})
    md = [f"# Run report: {', '.join(r.name for r in runs)}", ""]
    written = []
    md += ["## Results (best dev epoch of each run)", ""]
    md += ["| run | kind | best epoch | epochs | dev scores | training minutes |", "|---|---|---|---|---|---|"]
    for r in runs:
        epoch, rec = r.best
        minutes = sum(x.get("seconds", 0) for x in r.records) / 60
        if rec is None:
            md.append(f"| {r.name} | {r.kind} | none | {len(r.trained)} | every dev score is NaN: the run diverged "
                      f"(a learning rate too high?) | {minutes:.1f} |")
            print(f"{r.log}: every dev score is NaN (the run diverged); its curves show the epochs it ran")
            continue
        d = rec["dev"]
        if r.kind == "multitask":
            scores = f"SST {d['sst']:.3f}, Quora {d['quora']:.3f}, STS r {d['sts']:.3f}, mean {rec['dev_score']:.3f}"
        elif r.kind == "classifier":
            scores = f"{r.dataset} accuracy {d['accuracy']:.3f}, macro-F1 {d.get('f1') or float('nan'):.3f}"
        else:
            scores = f"held-out masked-token accuracy {d['masked_acc']:.3f}"
        md.append(f"| {r.name} | {r.kind} | {epoch} | {len(r.trained)} | {scores} | {minutes:.1f} |")
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
        if not r.scores:
            md += [f"## {r.name}: no dev scores", "",
                   f"No `*-dev-scores.npz` beside {r.log}: the run predates them, or did not finish.", ""]
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
                md += [f"### Quora: accuracy {stats['accuracy']:.3f}, F1 {stats['f1']:.3f} at threshold 0.5", "",
                       f"![Quora precision-recall]({fig.name})", ""]
            else:
                fig, _ = plot_confusion(s, r.name, task, out.file(f"{slug}-{task}-confusion.png"))
                md += [f"### {task.upper()}: confusion matrix", "", f"![{task} confusion]({fig.name})", ""]
            written.append(fig)
            md += [f"Most wrong dev examples ({task}):", "", "| id | text | gold | predicted |", "|---|---|---|---|"]
            md += [f"| {e['id'][:10]} | {_md_escape(e['text'])} | {e['gold']} | {e['predicted']} |"
                   for e in worst_examples(s, task)]
            md += [""]
    md_path = out.file("report.md")
    md_path.write_text("\n".join(md) + "\n")
    out.close()
    print(f"report written: {md_path} with {len(written)} figures in {out.path}")
    return md_path, written


# ----------------------------------------------------------------------------- the results table

class OutFolder:
    """--out, the folder report.py writes into (made; a file in its place is one line). `file(name)` claims a
    file before it is written: one there that no run and no report wrote (or that changed since) is kept as
    a dated backup (runs.protect); `close()` records what was written and says in one line what was kept."""

    def __init__(self, out, own=()):
        self.path, self.kept, self.written = Path(out), [], []
        for p in (self.path, *self.path.parents):
            if p.exists() and not p.is_dir():
                raise MinbertError(f"--out {self.path}: {p} is a file; report.py writes a folder of figures there")
        folder = run_folder_of(self.path)  # a report may go into the folder of a run it reports on, no other
        if folder is not None and folder not in own:
            raise MinbertError(f"--out {self.path}: inside {folder}, the folder of a run this report is not about, whose "
                               f"files belong to its checkpoint and log: name a folder outside it (default: reports/)")
        self.path.mkdir(parents=True, exist_ok=True)

    def file(self, name):
        path = self.path / name
        self.kept += protect([path])
        self.written.append(path)
        return path

    def close(self):
        record([p for p in self.written if p.is_file()], "report.py", self.path)
        if self.kept:
            print(backup_line(self.kept))


def read_results(path):
    path = Path(path)
    if not path.is_file():
        raise MinbertError(f"{path}: results table not found")
    rows = list(csv.DictReader(read_text(path, "results table (CSV)").splitlines()))
    if not rows:
        raise MinbertError(f"{path}: no runs in the results table")
    for n, row in enumerate(rows, start=2):
        try:
            row["mean"] = float(row["mean"])
        except (KeyError, TypeError, ValueError):
            raise MinbertError(f"{path}: line {n}: no numeric 'mean' column (truncated row?)") from None
    return rows


def ranked(rows):
    """Best mean first; a row whose mean is not a number (nan: a run that diverged) goes last."""
    return sorted(rows, key=lambda r: (math.isnan(r["mean"]), -r["mean"] if not math.isnan(r["mean"]) else 0))


def results_view(path, out):
    rows = ranked(read_results(path))
    cols = ["run", "training", "pair_encoding", "lr", "epochs", "seed", "sst_acc", "quora_acc", "sts_r", "mean",
            "best_epoch", "minutes"]
    cols = [c for c in cols if c in rows[0]]
    table = [[str(i + 1)] + [f"{r[c]:.4f}" if c == "mean" else str(r.get(c, "")) for c in cols]
             for i, r in enumerate(rows)]
    header = ["rank"] + cols
    widths = [max(len(h), *(len(t[j]) for t in table)) for j, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for t in table:
        print("  ".join(v.ljust(w) for v, w in zip(t, widths)))
    out = OutFolder(out)
    names = [r.get("run") or f"row {i + 1}" for i, r in enumerate(rows)]
    fig, ax = plt.subplots(figsize=(7, max(2.4, 0.9 + 0.35 * len(rows))))
    y = np.arange(len(rows))[::-1]
    ax.barh(y, [r["mean"] for r in rows], color="C0")
    for yi, r in zip(y, rows):
        ax.text(r["mean"], yi, f" {r['mean']:.3f}", va="center", fontsize=8)
    ax.set_yticks(y)
    ax.set_yticklabels(names, fontsize=8)
    finite = [r["mean"] for r in rows if not math.isnan(r["mean"])] or [0.0]
    ax.set_xlim(max(0.0, min(finite) - 0.05), min(1.0, max(finite) + 0.04))
    ax.set_xlabel("dev mean (SST acc, Quora acc, (STS r + 1) / 2)")
    ax.set_title(f"Runs in {Path(path).name}, best first", fontsize=10)
    ax.grid(alpha=0.3, axis="x")
    fig_path = _save(fig, out.file("results.png"))
    out.close()
    print(f"bar chart written: {fig_path}")
    return rows, fig_path


def build_parser():
    ap = Parser(prog="report.py", description=__doc__)
    ap.add_argument("runs", nargs="*", metavar="CHECKPOINT_OR_LOG", help="run folders, checkpoints or logs")
    ap.add_argument("--results", metavar="CSV", help="rank every run of a results table and chart it")
    ap.add_argument("--out", default=None, help="output folder (default: reports/NAME of the first run, or "
                                                "reports/results)")
    return ap


def main(argv=None):
    args = build_parser().parse_args(argv)
    if not args.runs and not args.results:
        raise MinbertError("report.py: give run folders, checkpoints or logs, or --results CSV")
    if args.results:
        results_view(args.results, args.out or "reports/results")
    if args.runs:
        first = Path(args.runs[0])
        default = first.name if first.is_dir() else first.parent.name
        return report(args.runs, args.out or Path("reports") / default)


if __name__ == "__main__":
    main_guard(main)
