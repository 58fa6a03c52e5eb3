"""Figures 15-17: class-wise robustness across the RobustBench model zoo (params `zoo`).

Each draws one (dataset, threat model) panel from the zoo's class-wise table
(results/<preset>/zoo/tables/classwise.csv), at the threat model's robust evaluation:

* zoo_classwise: models x classes heatmap of robust accuracy, models sorted by their mean;
  the Wilson intervals go to a table beside the figure (`<stem>.csv`);
* zoo_ranks: Spearman rank agreement of the class accuracies between zoo models and our
  PGD-AT runs (the study's class-wise table), and how often each class is the worst;
* zoo_gap: the best-minus-worst class gap against the mean class accuracy.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from study.labels import dataset_name, eval_name, zoo_model_name

if TYPE_CHECKING:  # the figure catalog imports this module; pandas and matplotlib where a figure is drawn
    import pandas as pd

OURS = "Ours: PGD-AT"


def zoo_rows(table: Path, dataset: str | None, runs: Sequence[str] | None,
             evaluations: Sequence[str] | None) -> tuple[pd.DataFrame, str]:
    """The rows of the panel's zoo runs at its evaluation (the first given), and that evaluation."""
    import pandas as pd

    rows = pd.read_csv(table)
    if runs:
        rows = rows[rows["run_id"].isin(runs)]
    if dataset:
        rows = rows[rows["dataset"] == dataset]
    ev = list(evaluations or [])[0] if evaluations else "clean"
    rows = rows[(rows["eval"] == ev) & (rows["n"] > 0)]
    if rows.empty:
        raise ValueError(f"{table}: no class-wise rows of the zoo runs at evaluation {ev!r}")
    return rows.assign(model_label=rows["model"].map(zoo_model_name)), ev


def class_matrix(rows: pd.DataFrame) -> pd.DataFrame:
    """Models x classes accuracy (%), models sorted by their mean class accuracy, best first."""
    wide = rows.pivot_table(index="model_label", columns="class", values="acc", aggfunc="mean") * 100
    names = rows.drop_duplicates("class").set_index("class")["class_name"]
    wide.columns = [names[c] for c in wide.columns]
    return wide.loc[wide.mean(axis=1).sort_values(ascending=False).index]


THREAT_MODELS = {"Linf": "L∞", "L2": "L2", "corruptions": "corruptions"}


def _title(dataset: str, threat_model: str | None, ev: str, what: str) -> str:
    tm = f" {THREAT_MODELS.get(threat_model, threat_model)}" if threat_model else ""
    return f"{dataset_name(dataset)} · RobustBench zoo{tm} · {what} ({eval_name(ev)})"


def draw_zoo_classwise(table: Path, out_stem: str | Path, *, dataset: str | None = None,
                       threat_model: str | None = None, runs: Sequence[str] | None = None,
                       evaluations: Sequence[str] | None = None, **_) -> list[Path]:
    """Figure 15: class-wise robust accuracy of every zoo model (heatmap) and its intervals (CSV)."""
    import matplotlib.pyplot as plt
    import numpy as np

    from study.figures.style import figure_size, figure_style, save_figure
    from study.io import atomic_path

    rows, ev = zoo_rows(table, dataset, runs, evaluations)
    wide = class_matrix(rows)
    with figure_style():
        fig, ax = plt.subplots(figsize=figure_size(1.6 + 0.75 * wide.shape[1], 1.4 + 0.45 * len(wide)))
        image = ax.imshow(wide.to_numpy(), cmap="viridis", vmin=0, vmax=100, aspect="auto")
        ax.set_yticks(range(len(wide)), list(wide.index))
        ax.set_xticks(range(wide.shape[1]), list(wide.columns) if wide.shape[1] <= 20 else [""] * wide.shape[1],
                      rotation=45, ha="right")
        ax.grid(False)
        if wide.shape[1] <= 20:
            for (i, j), value in np.ndenumerate(wide.to_numpy()):
                ax.text(j, i, f"{value:.0f}", ha="center", va="center", fontsize=7,
                        color="white" if value < 55 else "black")
        fig.colorbar(image, ax=ax, label=f"robust accuracy, % ({eval_name(ev)})")
        ax.set_title(_title(rows["dataset"].iloc[0], threat_model, ev, "class-wise robust accuracy")
                     + "\nmodels sorted by mean class accuracy", fontsize=10)
        fig.tight_layout()
        written = save_figure(fig, out_stem)
    intervals = rows.assign(model_name=rows["model_label"], accuracy_pct=100 * rows["acc"],
                            ci_lo_pct=100 * rows["ci_lo"], ci_hi_pct=100 * rows["ci_hi"])
    cols = ["model", "model_name", "eval", "class", "class_name", "n", "correct", "accuracy_pct", "ci_lo_pct",
            "ci_hi_pct"]
    with atomic_path(Path(f"{out_stem}.csv")) as tmp:
        intervals[cols].round(2).to_csv(tmp, index=False)
    return [*written, Path(f"{out_stem}.csv")]


def reference_profile(reference: str | Path | None, dataset: str, ev: str) -> pd.Series | None:
    """Our PGD-AT runs' class accuracies (%, mean over runs) on `dataset`, at `ev` or else PGD-20."""
    import pandas as pd

    if not reference or not Path(reference).exists():
        return None
    ours = pd.read_csv(reference)
    ours = ours[(ours["dataset"] == dataset) & (ours["method"] == "pgd_at") & (ours["n"] > 0)]
    if "train_data" in ours:
        ours = ours[ours["train_data"] == "original"]
    for key in (ev, "pgd20"):
        part = ours[ours["eval"] == key]
        if not part.empty:
            return part.groupby("class_name", sort=False)["acc"].mean() * 100
    return None


def draw_zoo_ranks(table: Path, out_stem: str | Path, *, dataset: str | None = None,
                   threat_model: str | None = None, runs: Sequence[str] | None = None,
                   evaluations: Sequence[str] | None = None, reference: str | None = None, **_) -> list[Path]:
    """Figure 16: do the zoo's models (and ours) rank the classes alike, and which class is worst?"""
    import matplotlib.pyplot as plt
    import numpy as np

    from study.figures.style import figure_size, figure_style, save_figure

    rows, ev = zoo_rows(table, dataset, runs, evaluations)
    wide = class_matrix(rows).T  # classes x models
    ours = reference_profile(reference, rows["dataset"].iloc[0], ev)
    if ours is not None:
        wide[OURS] = ours.reindex(wide.index)
    rho = wide.rank().corr(method="pearson")  # Spearman: Pearson of the ranks
    worst = wide.idxmin(axis=0).value_counts().reindex(wide.index, fill_value=0)
    with figure_style():
        fig, (ax, bx) = plt.subplots(1, 2, figsize=figure_size(5 + 0.55 * len(rho) + 4, 2.5 + 0.45 * len(rho)),
                                     gridspec_kw={"width_ratios": [max(len(rho), 2), 3]})
        image = ax.imshow(rho.to_numpy(), cmap="RdBu_r", vmin=-1, vmax=1)
        ax.set_xticks(range(len(rho)), list(rho.columns), rotation=45, ha="right")
        ax.set_yticks(range(len(rho)), list(rho.index))
        ax.grid(False)
        if len(rho) <= 14:
            for (i, j), value in np.ndenumerate(rho.to_numpy()):
                ax.text(j, i, "" if np.isnan(value) else f"{value:.2f}", ha="center", va="center", fontsize=7)
        fig.colorbar(image, ax=ax, label="Spearman's ρ of class accuracies", shrink=0.8)
        ax.set_title("rank agreement of the class ranking")
        top = worst[worst > 0].sort_values(ascending=True)
        bx.barh(range(len(top)), top.to_numpy(), color="#C44E52")
        bx.set_yticks(range(len(top)), list(top.index))
        bx.set_xlabel(f"models whose worst class it is (of {wide.shape[1]})")
        bx.grid(axis="x", alpha=0.3)
        bx.set_title("worst class")
        fig.suptitle(_title(rows["dataset"].iloc[0], threat_model, ev, "class ranking"), fontsize=11)
        fig.tight_layout()
        return save_figure(fig, out_stem)


def draw_zoo_gap(table: Path, out_stem: str | Path, *, dataset: str | None = None,
                 threat_model: str | None = None, runs: Sequence[str] | None = None,
                 evaluations: Sequence[str] | None = None, **_) -> list[Path]:
    """Figure 17: best-minus-worst class gap against the mean class accuracy, one point per model."""
    import matplotlib.pyplot as plt
    import numpy as np

    from study.figures.style import figure_size, figure_style, percent_axis, save_figure

    rows, ev = zoo_rows(table, dataset, runs, evaluations)
    wide = class_matrix(rows)
    mean, gap = wide.mean(axis=1), wide.max(axis=1) - wide.min(axis=1)
    with figure_style():
        fig, ax = plt.subplots(figsize=figure_size(8.5, 4.8))
        colors = plt.get_cmap("tab10")(np.arange(len(wide)) % 10)
        for k, label in enumerate(wide.index):
            ax.scatter(mean[label], gap[label], color=colors[k], s=45, label=label, zorder=3)
        percent_axis(ax, "mean class accuracy, %", axis="x")
        percent_axis(ax, "gap: best - worst class, percentage points", axis="y")
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False, title="model")
        ax.set_title(_title(rows["dataset"].iloc[0], threat_model, ev, "class gap vs mean"), fontsize=10)
        fig.tight_layout()
        return save_figure(fig, out_stem)
