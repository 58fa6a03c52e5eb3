"""Figure 8: rank agreement of the class accuracies between the configurations (model, method,
training setting) of one dataset, from the class-wise table (study tables); the drawing is
study.figures.explain's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the figure catalog imports this module; pandas is imported where a figure is drawn
    import pandas as pd
    from matplotlib.figure import Figure

from study.figures.fig04_06_discrepancy import counted_rows, read_table, setting_label, with_roles
from study.labels import dataset_name, eval_name, eval_norm, method_name, model_name


def rank_agreement_figure(table: pd.DataFrame, dataset: str | None, evaluations: Sequence[str] | None,
                          title: str | None) -> Figure:
    """The rank-agreement figure of `table`'s configurations on `dataset` (its only one by
    default), a panel per threat model of `evaluations`; draw_rank_agreement saves it."""
    from study.figures.explain import plot_rank_agreement
    from study.figures.style import display_title, table_recipe
    from study.figures.trust import left_out_note
    from study.metrics.rank import class_accuracy_matrix, rank_agreement

    if dataset is not None:
        table = table[table["dataset"] == dataset]
    if table.empty or table["dataset"].nunique() != 1:
        raise ValueError("rank agreement compares class accuracies of one dataset; give --dataset")
    table = table.copy()
    table["setting"] = _settings(table)
    varied = [c for c in ("model", "setting") if table[c].nunique() > 1]
    table["config"] = table.apply(
        lambda r: " | ".join([model_name(r["model"]) if "model" in varied or not varied else "",
                              method_name(r["method"]), r["setting"] if "setting" in varied else ""]).strip(" |")
        .replace(" |  | ", " | "), axis=1)
    table, flagged = counted_rows(with_roles(table, ["run_id"], evaluations), "rank_agreement")
    left_out = left_out_note(flagged, ["config", "eval"], lambda k: f"{display_title(str(k[0]))} · {eval_name(k[1])}")
    # one robustness panel per threat model: budgets of two norms ranked together are not comparable
    table["role"] = [role if role == "clean" else f"robust {eval_norm(ev)}"
                     for role, ev in zip(table["role"], table["eval"], strict=True)]
    panels, alone = {}, []
    for role, part in table.groupby("role", sort=True):
        wide = class_accuracy_matrix(part, ["config"])
        if wide.shape[1] < 2:  # one configuration under this threat model: nothing to rank it with
            alone.append(f"{display_title(str(wide.columns[0]))} · {eval_name(str(part['eval'].iloc[0]))}")
            continue
        name = "clean accuracy" if role == "clean" else \
            f"robustness ({', '.join(map(eval_name, sorted(part['eval'].unique())))})"
        panels[name] = (rank_agreement(wide, "spearman"), rank_agreement(wide, "kendall"))
    if not panels and left_out:
        raise ValueError(f"the checks flagged all but one configuration of figure rank_agreement: {left_out}")
    if not panels:
        raise ValueError("rank agreement needs two configurations evaluated under the same threat model; "
                         f"{dataset_name(str(table['dataset'].iloc[0]))} has none: " + "; ".join(alone))
    ds = table["dataset"].iloc[0]
    seeds = table["seed"].nunique()
    return plot_rank_agreement(panels, title or f"{dataset_name(ds)}: do the same classes lead and lag? "
                                                f"(class accuracies, mean of {seeds} seed{'s' if seeds > 1 else ''})",
                               left_out=_note(left_out, alone), recipe=table_recipe(table))


def _settings(table: pd.DataFrame) -> pd.Series:
    """Each row's training setting, named fully enough to tell apart every configuration the plan
    counts (study.figures.panels.rank_agreement: the whole training setting): the epochs and the
    training images per class are added where they differ, so two such runs are never ranked as one."""
    names = table.apply(setting_label, axis=1)
    for column, word in (("epochs", "{:g} epochs"), ("train_per_class", "{:g}/class")):
        if column in table.columns and table[column].nunique(dropna=False) > 1:
            names = names + table[column].map(lambda v, w=word: " · " + ("all/class" if v != v else w.format(v)))
    return names


def _note(left_out: str | None, alone: list[str]) -> str | None:
    """The flagged evaluations left out, and the configurations alone under their threat model
    (not ranked: a rank agreement needs two)."""
    import textwrap

    single = textwrap.fill("not ranked, the only configuration under its threat model: " + "; ".join(alone),
                           110) if alone else None
    return "\n".join(filter(None, [left_out, single])) or None


def draw_rank_agreement(table: Path, out_stem: str | Path, *, dataset: str | None = None,
                        runs: Sequence[str] | None = None, evaluations: Sequence[str] | None = None,
                        title: str | None = None, **_) -> list[Path]:
    """Figure 8: rank agreement of the class accuracies of one dataset's configurations."""
    from study.figures.style import save_figure

    rows = read_table(table, runs, "rank_agreement")
    return save_figure(rank_agreement_figure(rows, dataset, evaluations, title), out_stem)
