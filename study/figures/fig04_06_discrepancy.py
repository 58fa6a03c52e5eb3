"""Figures 4, 5 and 6: the class-wise discrepancy of the study's runs per dataset, model or
training setting, from the class-wise table (study tables); the drawing is
study.figures.discrepancy's. The reading of the table, the choice of one robust evaluation per
configuration and the trust rule serve figure 8 too (fig08_rank_agreement)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the figure catalog imports this module; pandas is imported where a figure is drawn
    import pandas as pd
    from matplotlib.figure import Figure

from study.labels import dataset_name, eval_name, method_name, model_name

DISCREPANCY_BY = ("dataset", "model", "setting")


def setting_label(row: pd.Series | dict) -> str:
    """Short name of a training setting: 'SGD 0.1 · step · wd 5e-04'."""
    return f"{str(row['optimizer']).upper() if row['optimizer'] == 'sgd' else 'Adam'} {row['lr']:g} · " \
           f"{row['schedule']} · wd {row['weight_decay']:.0e}".replace("wd 0e+00", "wd 0")


def read_table(path: str | Path, runs: Sequence[str] | None, kind: str) -> pd.DataFrame:
    import pandas as pd

    table = pd.read_csv(path)
    if runs:
        unknown = sorted(set(runs) - set(table["run_id"]))
        if unknown:
            raise ValueError(f"run(s) {unknown[:3]} not in {path} ({len(unknown)} missing)")
        table = table[table["run_id"].isin(runs)]
    if table.empty:
        raise ValueError(f"no rows for figure {kind} in {path}")
    return table


def with_roles(table: pd.DataFrame, key: Sequence[str], evaluations: Sequence[str] | None) -> pd.DataFrame:
    """Keep clean and, per `key` group, one robust evaluation (the first of `evaluations` present:
    MNIST's PGD-40 and CIFAR's PGD-20 share the robustness panel)."""
    import numpy as np
    import pandas as pd

    prefer = list(evaluations or []) + sorted(set(table["eval"]) - set(evaluations or []))
    keep = []
    for _, group in table.groupby(list(key), sort=False, dropna=False):
        have = set(group["eval"])
        robust = next((e for e in prefer if e in have and e != "clean"), None)
        keep.append(group[group["eval"].isin({"clean", robust})])
    out = pd.concat(keep, ignore_index=True)
    return out.assign(role=np.where(out["eval"] == "clean", "clean", "robust"))


def counted_rows(table: pd.DataFrame, kind: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The trust rule (study.figures.trust): the rows that count, and the flagged ones left out
    (after the evaluations are chosen, so a flagged one is named, never silently replaced)."""
    from study.figures.trust import split_counted

    counted, flagged = split_counted(table)
    if counted.empty:
        raise ValueError(f"every evaluation of figure {kind} was flagged or failed by the checks "
                         "(check_status); nothing counted is left to draw")
    return counted, flagged


def discrepancy_figure(table: pd.DataFrame, by: str, evaluations: Sequence[str] | None,
                       title: str | None) -> Figure:
    """The discrepancy figure of `table`'s counted rows, one bar group per value of `by` (dataset,
    model or setting); `evaluations`: those drawn (all by default). draw_discrepancy saves it."""
    from study.figures.discrepancy import plot_discrepancy
    from study.figures.style import table_recipe
    from study.figures.trust import left_out_note
    from study.metrics.discrepancy_intervals import discrepancy_summary

    if by not in DISCREPANCY_BY:
        raise ValueError(f"unknown --by {by!r}; valid: {', '.join(DISCREPANCY_BY)}")
    table = table.copy()
    if by == "setting":
        table["setting"] = table.apply(setting_label, axis=1)
    table, flagged = counted_rows(with_roles(table, [by, "method"], evaluations), "discrepancy")
    summary = discrepancy_summary(table, by=[by, "method", "role", "eval"])
    names: dict[str, Callable[[str], str]] = {"dataset": dataset_name, "model": model_name, "setting": str}
    pretty = names[by]
    left_out = left_out_note(flagged, [by, "method", "eval"], lambda k: " · ".join(
        [pretty(str(k[0])), method_name(str(k[1])), eval_name(str(k[2]))]))
    labels = {}
    for cat, group in summary.groupby(by, sort=False):
        robust = sorted(set(group.loc[group["role"] == "robust", "eval"]))
        # the robust evaluation a dataset is drawn with; none when the checks left every one out
        labels[str(cat)] = pretty(str(cat)) + (f"\n({', '.join(map(eval_name, robust))})"
                                               if by == "dataset" and robust else "")
    if by != "dataset":
        robust = sorted(set(summary.loc[summary["role"] == "robust", "eval"]))
        datasets = ", ".join(dataset_name(d) for d in sorted(table["dataset"].unique()))
        title = title or f"class-wise discrepancy per {'architecture' if by == 'model' else 'optimization setting'}" \
                         f" · {datasets} · robustness: {', '.join(map(eval_name, robust))}"
    # the runs counted (one flagged on every evaluation is drawn nowhere, so not described)
    return plot_discrepancy(summary, by, labels=labels, title=title or "class-wise discrepancy per dataset",
                            left_out=left_out, recipe=table_recipe(table))


def draw_discrepancy(table: Path, out_stem: str | Path, *, runs: Sequence[str] | None = None, by: str | None = None,
                     evaluations: Sequence[str] | None = None, title: str | None = None, **_) -> list[Path]:
    """Figures 4, 5, 6: the runs' class-wise discrepancy per dataset, model or setting (`by`)."""
    from study.figures.style import save_figure

    rows = read_table(table, runs, "discrepancy")
    return save_figure(discrepancy_figure(rows, by or "dataset", evaluations, title), out_stem)
