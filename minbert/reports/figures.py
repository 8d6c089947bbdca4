"""report.py's figures, with matplotlib's Agg backend (no window ever opens): learning curves with every run
overlaid, a confusion matrix (SST, CFIMDB), a precision-recall curve (Quora), predicted against gold scores
and the error per gold bin (STS), and the dev examples each model got most wrong."""
import math

import numpy as np
from matplotlib.figure import Figure

from minbert.scoring import pearson

DPI = 150
# The panels of each pipeline's learning curves: (record field or dev metric, title, axis label).
PANELS = {
    "multitask": [("train_loss", "train loss", "loss (sum of "
                                               "task losses)"), ("sst", "SST dev accuracy", "accuracy"),
                  ("quora", "Quora dev accuracy", "accuracy"), ("sts", "STS dev Pearson r", "Pearson r"),
                  ("dev_score", "dev mean (leaderboard)", "mean of SST, Quora, (r + 1) / 2")],
    "classifier": [("train_loss", "train "
                                  "loss", "cross-entropy"), ("train_accuracy", "train accuracy", "accuracy"),
                   ("accuracy", "dev accuracy", "accuracy")],
    "pretrain": [("train_loss", "train loss", "masked-LM cross-entropy"),
                 ("masked_acc", "held-out masked-token accuracy", "accuracy"),
                 ("masked_loss", "held-out masked-LM loss", "cross-entropy")],
}
# Build GPT-2's Part 1 and its cloze task log what minBERT's Part 1 does (minbert/pipelines/classifier.py).
PANELS["gpt2-classifier"] = PANELS["gpt2-paraphrase"] = PANELS["classifier"]
PANELS["gpt2-sonnet"] = [("train_loss", "train loss", "next-token cross-entropy"),
                         ("perplexity", "true dev sonnets' perplexity", "perplexity")]
TITLES = {"multitask": "Multitask", "classifier": "Part 1", "pretrain": "Pretraining",
          "gpt2-classifier": "GPT-2 Part 1",
          "gpt2-paraphrase": "GPT-2 paraphrase (cloze)", "gpt2-sonnet": "GPT-2 sonnets"}


def subplots(*grid, figsize, **kw):
    """(figure, axes) as pyplot.subplots gives them, on a Figure of its own: drawn by Agg when saved, never
    shown, and without pyplot's import (a third of a second of every report.py start)."""
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(*grid, **kw)


def save_figure(fig, path, rect=(0, 0, 1, 1)):
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=DPI)
    return path


def plot_curves(runs, path, title):
    """One panel per metric, every run overlaid, the best epoch of each marked with a star."""
    panels = PANELS[runs[0].kind]
    fig, axes = subplots(1, len(panels), figsize=(3.4 * len(panels), 3.4), squeeze=False)
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
        return save_figure(fig, path)
    fig.legend(handles, labels, loc="lower center", ncol=min(len(runs), 4), fontsize=8, frameon=False)
    return save_figure(fig, path, rect=(0, 0.08 + 0.04 * ((len(runs) - 1) // 4), 1, 1))  # room for the legend


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
    fig, axes = subplots(1, 2, figsize=(9.5, 4.2))
    for ax, data, what, fmt in ((axes[0], m, "counts", "d"), (axes[1], norm, "row-normalised "
                                                                             "(recall per class)", ".2f")):
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
    fig.suptitle(f"{run_name}: {task.upper()} dev confusion matrix "
                 f"(accuracy {acc:.3f}, {int(m.sum())} sentences)",
                 fontsize=11)
    return save_figure(fig, path), m


def plot_quora(s, run_name, path):
    labelled = ~np.isnan(s["gold"])
    gold, logit = s["gold"][labelled].astype(int), s["output"][labelled]
    prob = 1 / (1 + np.exp(-logit.astype(np.float64)))
    pred = (logit > 0).astype(int)
    tp = int(((pred == 1) & (gold == 1)).sum())
    acc, f1 = float(np.mean(pred == gold)), 2 * tp / max(2 * tp + int((pred != gold).sum()), 1)
    precision, recall = precision_recall(gold, prob)
    p_at, r_at = tp / max(int(pred.sum()), 1), tp / max(int(gold.sum()), 1)
    fig, ax = subplots(figsize=(5.2, 4.4))
    ax.plot(recall, precision, color="C0", label="precision-recall curve")
    ax.plot([r_at], [p_at], marker="o", ms=8, color="C3", linestyle="none",
            label=f"threshold 0.5: accuracy {acc:.3f}, F1 {f1:.3f}")
    ax.axhline(gold.mean(), color="grey", ls="--", lw=1, label="chance (share of paraphrases "
                                                               f"{gold.mean():.2f})")
    ax.set_xlabel("recall (paraphrases found)")
    ax.set_ylabel("precision (paraphrase predictions right)")
    ax.set_xlim(0, 1.01)
    ax.set_ylim(0, 1.01)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title(f"{run_name}: Quora dev paraphrase detection", fontsize=10)
    return save_figure(fig, path), {"accuracy": acc, "f1": f1}


STS_BINS = [0, 1, 2, 3, 4, 5.0001]


def precision_recall(gold, score):
    """(precision, recall) of predicting 1 where `score` >= t, for each distinct score t from the highest down,
    then the curve's end at recall 0, precision 1: scikit-learn's precision_recall_curve, written here so that
    report.py does not import scikit-learn (most of a second of every start)."""
    order = np.argsort(-np.asarray(score, dtype=np.float64), kind="stable")
    score, gold = np.asarray(score, dtype=np.float64)[order], np.asarray(gold)[order] == 1
    last = np.r_[np.flatnonzero(np.diff(score)), len(score) - 1]  # the last row of each distinct score
    tp = np.cumsum(gold)[last]
    predicted = last + 1
    precision = tp / predicted
    recall = tp / tp[-1] if tp[-1] > 0 else np.ones_like(precision)
    return np.r_[precision[::-1], 1.0], np.r_[recall[::-1], 0.0]


def plot_sts(s, run_name, path):
    labelled = ~np.isnan(s["gold"])
    gold, pred = s["gold"][labelled], s["pred"][labelled]
    r = pearson(pred, gold)
    bins = np.digitize(gold, STS_BINS[1:-1])
    mae = [float(np.abs(pred - gold)[bins == b].mean()) if (bins == b).any() else np.nan for b in range(5)]
    counts = [int((bins == b).sum()) for b in range(5)]
    fig, axes = subplots(1, 2, figsize=(10, 4.4))
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
    return save_figure(fig, path), {"pearson": r, "mae_per_bin": dict(zip(names, mae))}


def worst_examples(s, task, k=5):
    """The k labelled dev examples the model got most wrong: of those predicted wrong, the most confident (SST,
    CFIMDB, Quora: fewer than k where fewer are wrong, none where none is), or the largest absolute error (STS)."""
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
    # a right prediction is never shown as wrong, however unsure it was
    wrong = np.ones(len(gold), bool) if task == "sts" else s["pred"][labelled].astype(np.float64) != gold
    order = [i for i in np.argsort(-err, kind="stable") if wrong[i]][:k]
    rows = []
    for i in order:
        j = labelled[i]
        text = s["text1"][j] + (f" ||| {s['text2'][j]}" if s["text2"][j] else "")
        rows.append({"id": str(s["ids"][j]), "text": str(text), "gold": f"{gold[i]:g}", "predicted": shown(i),
                     "error": float(err[i])})
    return rows


def plot_results(names, means, title, path):
    """A bar per run of a results table, best first, its dev mean written beside it."""
    fig, ax = subplots(figsize=(7, max(2.4, 0.9 + 0.35 * len(names))))
    y = np.arange(len(names))[::-1]
    ax.barh(y, means, color="C0")
    for yi, m in zip(y, means):
        ax.text(m, yi, f" {m:.3f}", va="center", fontsize=8)
    ax.set_yticks(y)
    ax.set_yticklabels(names, fontsize=8)
    finite = [m for m in means if not math.isnan(m)] or [0.0]
    ax.set_xlim(max(0.0, min(finite) - 0.05), min(1.0, max(finite) + 0.04))
    ax.set_xlabel("dev mean (SST acc, Quora acc, (STS r + 1) / 2)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, axis="x")
    return save_figure(fig, path)


VERDICT_COLORS = {"better": "C2", "worse": "C3"}


def plot_differences(rows, names, path, title):
    """report.py --compare's picture: per task, each candidate's difference from the baseline with its 95%
    interval, green where it is better, red where worse, grey within noise; the zero line is "no
    difference". `rows` are compare.Row, `names` a task's label."""
    tasks = list(dict.fromkeys(r.task for r in rows))
    candidates = list(dict.fromkeys(r.candidate for r in rows))
    step = 0.8 / len(candidates)
    fig, ax = subplots(figsize=(7.5, max(2.6, 1.0 + 0.45 * len(rows))))
    for r in rows:
        j = candidates.index(r.candidate)
        y = len(tasks) - 1 - tasks.index(r.task) + 0.4 - step * (j + 0.5)
        color = VERDICT_COLORS.get(r.verdict, "grey")
        low, high = r.interval
        # the bar from the interval's ends, the dot apart: a percentile interval need not hold the observed
        # difference (few resamples, a skewed statistic), which matplotlib's xerr could not draw
        ax.plot([low, high], [y, y], color=color, lw=1.5, solid_capstyle="butt")
        ax.plot([low, low, float("nan"), high, high], [y - 0.08, y + 0.08, float("nan"), y - 0.08, y + 0.08],
                color=color, lw=1.0)
        ax.plot([r.diff], [y], "o", ms=5, color=color)
        if len(candidates) > 1:
            ax.text(high, y, f"  {r.candidate}", va="center", fontsize=7, color="dimgrey")
    ax.axvline(0, color="black", lw=0.8)
    ax.set_yticks(range(len(tasks)))
    ax.set_yticklabels([names[t] for t in reversed(tasks)], fontsize=9)
    ax.set_ylim(-0.6, len(tasks) - 0.4)
    ax.set_xlabel("candidate - baseline (dot: observed; bar: 95% interval)")
    ax.set_title(f"{title}\ngreen: better, red: worse, grey: neither "
                 "(after Holm-Bonferroni)", fontsize=10)
    ax.grid(alpha=0.3, axis="x")
    return save_figure(fig, path)
