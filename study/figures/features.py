"""Figure 12: models trained on robust / non-robust feature datasets, class by class."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from study.figures.style import (
    AUTO,
    display_title,
    draw_caveat,
    figure_size,
    figure_style,
    percent_axis,
    resolve_caveat,
    run_caveat,
    table_caveat,
    table_recipe,
    with_recipe,
)
from study.labels import dataset_name, eval_label, model_name
from study.metrics.seeds import seed_summary

# Order and names of the bars: the source models first, then what was trained on their datasets.
TRAINING_LABELS = {
    "source_standard": "standard model (source)",
    "source_robust": "L2-robust model (source)",
    "d_r": "trained on D_R",
    "d_nr": "trained on D_NR",
    "d_rand": "trained on D_rand",
    "d_det": "trained on D_det",
}
_COLORS = {
    "source_standard": "#4C72B0",
    "source_robust": "#55A868",
    "d_r": "#8DD3A0",
    "d_nr": "#9DB4DE",
    "d_rand": "#DD8452",
    "d_det": "#C44E52",
}


def feature_rows(classwise: pd.DataFrame, dataset: str, model: str, sources: Mapping[str, str]) -> pd.DataFrame:
    """The class-wise rows of figure 12, with a `training` column naming each bar group:
    the source runs (`sources`: role -> run id) and the runs trained on constructed data."""
    table = classwise[classwise["dataset"] == dataset]
    parts = []
    for role, run in sources.items():
        if role not in ("standard", "robust"):
            raise ValueError(f"unknown source role {role!r}; valid: standard, robust")
        parts.append(table[table["run_id"] == run].assign(training=f"source_{role}"))
    constructed = table[(table["model"] == model) & (table["train_data"] != "original")]
    parts.append(constructed.assign(training=constructed["train_data"]))
    rows = pd.concat(parts, ignore_index=True)
    if rows.empty or constructed.empty:
        raise ValueError(f"no rows for models trained on constructed {dataset} data with model {model}")
    return rows


def _flagged_trainings(rows: pd.DataFrame, trainings: list[str], n_classes: int) -> set[str]:
    """Training sets whose models are at chance level on clean test images (too short to compare)."""
    clean = rows[rows["eval"] == "clean"]
    return {t for t in trainings
            if run_caveat(mean_acc=float(clean.loc[clean["training"] == t, "acc"].mean()), num_classes=n_classes)}


def _bars(ax: Axes, sub: pd.DataFrame, trainings: list[str], labels: dict[str, str]) -> None:
    width = 0.8 / len(trainings)
    for j, training in enumerate(trainings):
        grp = sub[sub["training"] == training]
        if grp.empty:
            continue
        bars = seed_summary(grp, ["class"]).sort_values("class")  # each run of a training set is a seed
        x = bars["class"].to_numpy() + (j - (len(trainings) - 1) / 2) * width
        mid = bars["acc"].to_numpy() * 100
        lo, hi = bars["ci_lo"].to_numpy() * 100, bars["ci_hi"].to_numpy() * 100
        err = np.vstack([np.clip(mid - lo, 0, None), np.clip(hi - mid, 0, None)])
        ax.bar(x, mid, width=width, color=_COLORS[training], label=labels[training])
        ax.errorbar(x, mid, yerr=err, fmt="none", ecolor="black", elinewidth=0.7, capsize=1.5)


def plot_feature_classwise(rows: pd.DataFrame, title: str, *, eval_settings: Mapping[str, Mapping] | None = None,
                           caveat: str | None = AUTO, recipe: str | None = AUTO) -> Figure:
    """One panel per evaluation; per class, one bar per training set (mean over seeds) with its
    95% interval over seeds and test images (Wilson for a single run). `caveat` AUTO: a note on
    every panel when the runs have fewer than style.MIN_EPOCHS epochs, and a dagger on each
    training set whose models are at chance level. `recipe`: the title's second line (AUTO:
    style.table_recipe of the source runs and of those trained on the constructed sets)."""
    recipe = resolve_caveat(recipe, lambda: table_recipe(rows))
    settings = dict(eval_settings or {})
    # The evaluations that the models trained on constructed data have (sources may have more).
    shown = dict.fromkeys(rows.loc[~rows["training"].str.startswith("source_"), "eval"])
    evals = [e for e in shown if e == "clean"] + [e for e in shown if e != "clean"]
    trainings = [t for t in TRAINING_LABELS if t in set(rows["training"])]
    classes = rows[["class", "class_name"]].drop_duplicates("class").sort_values("class")
    n_classes = len(classes)
    flagged = _flagged_trainings(rows, trainings, n_classes) if caveat == AUTO else set()
    labels = {t: TRAINING_LABELS[t] + (" †" if t in flagged else "") for t in trainings}
    epochs_only = rows.drop(columns=["eval"], errors="ignore")  # the epochs part of the caveat; † covers chance
    note = resolve_caveat(caveat, lambda: table_caveat(epochs_only))
    with figure_style():
        fig = Figure(figsize=figure_size(max(8.0, 1.1 * n_classes + 2), 2.6 * len(evals) + 1.6),
                     layout="constrained")
        axes = np.atleast_1d(fig.subplots(len(evals), 1, sharex=True))
        for ax, ev in zip(axes, evals, strict=True):
            _bars(ax, rows[rows["eval"] == ev], trainings, labels)
            ax.axhline(100 / n_classes, color="grey", linewidth=0.8, linestyle=":")
            percent_axis(ax, "accuracy (%)")
            ax.set_title(f"real test set, {eval_label(ev, settings.get(ev))}", loc="left")
            draw_caveat(ax, note)
        axes[-1].set_xticks(classes["class"].to_numpy(), classes["class_name"].tolist(), rotation=40, ha="right")
        legend_title = "whiskers: 95% interval over seeds and test images; dotted line: chance"
        if flagged:
            legend_title += "\n† clean accuracy at chance level: run too short to compare"
        handles = {lab: h for ax in axes for h, lab in zip(*ax.get_legend_handles_labels(), strict=True)}
        fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncols=min(3, len(handles)),
                   frameon=False, title=legend_title, title_fontsize=8)
        fig.suptitle(with_recipe(display_title(title), recipe, fig.get_figwidth()))
    return fig


def plot_feature_examples(
    sets: Mapping[str, tuple[np.ndarray, Sequence[int]]], class_names: Sequence[str], title: str
) -> Figure:
    """A grid: one row per training set (original first), the same training images in each,
    every image titled with the label it is trained with. Images are uint8 (N, C, H, W)."""
    n = min(len(v[0]) for v in sets.values())
    with figure_style():
        fig = Figure(figsize=figure_size(1.25 * n + 1.5, 1.45 * len(sets) + 0.6), layout="constrained")
        axes = np.atleast_2d(fig.subplots(len(sets), n))
        for r, (name, (images, labels)) in enumerate(sets.items()):
            for c in range(n):
                ax = axes[r, c]
                img = np.transpose(images[c], (1, 2, 0))
                ax.imshow(img[:, :, 0] if img.shape[2] == 1 else img, cmap="gray" if img.shape[2] == 1 else None)
                ax.set_xticks([])
                ax.set_yticks([])
                ax.set_title(class_names[int(labels[c])], fontsize=8)
                if c == 0:
                    ax.set_ylabel(name, fontsize=9)
        fig.suptitle(display_title(title))
    return fig


def features_title(dataset: str, model: str, variant: str) -> str:
    suffix = "" if variant in ("official", "default") else f" ({variant} variant of the data)"
    return f"{dataset_name(dataset)}{suffix} | {model_name(model)} trained on constructed datasets"


def rows_class_names(rows: pd.DataFrame) -> list[str]:
    classes = rows[["class", "class_name"]].drop_duplicates("class").sort_values("class")
    return classes["class_name"].tolist()


def example_sets(original, constructed: Sequence, per_set: int = 8) -> dict[str, tuple[np.ndarray, list[int]]]:
    """The same training images (one per class, up to `per_set`) from the original set and
    from each constructed set. A constructed set holds, in order, the images of the
    stratified subset it was built from, so position i is the same source image in all."""
    from study.data.splits import stratified_subset

    settings = constructed[0].meta["constructed"]["settings"]
    subset = stratified_subset(original.train_y, settings["per_class"])
    labels = original.train_y[subset]
    positions = [int((labels == c).nonzero()[0]) for c in labels.unique().tolist()[:per_set]]
    sets = {"original": (original.train_x[subset[positions]].numpy(), labels[positions].tolist())}
    for con in constructed:
        kind = con.meta["constructed"]["kind"]
        sets[EXAMPLE_NAMES[kind]] = (con.train_x[positions].numpy(), con.train_y[positions].tolist())
    return sets


EXAMPLE_NAMES = {"d_r": "D_R", "d_nr": "D_NR", "d_rand": "D_rand", "d_det": "D_det"}
