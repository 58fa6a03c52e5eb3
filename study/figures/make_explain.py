"""Draw figures 4, 5, 6 (discrepancy), 8 (rank agreement), 9 (confusion) and 10 (logit similarity)
from the tables and per-sample records (what `study figure KIND` runs for these kinds)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from study.evaluate.records import read_records
from study.figures.discrepancy import plot_discrepancy
from study.figures.explain import plot_confusion, plot_logit_similarity, plot_rank_agreement
from study.figures.style import pretty_dataset, pretty_eval, pretty_method, pretty_model, run_title, save_figure
from study.metrics.confusion import confusion_matrix, logit_cosine_similarity
from study.metrics.discrepancy_intervals import discrepancy_summary
from study.metrics.rank import class_accuracy_matrix, rank_agreement

EXPLANATION_KINDS = ("discrepancy", "rank_agreement", "confusion", "logit_similarity")
DISCREPANCY_BY = ("dataset", "model", "setting")


def setting_label(row: pd.Series | dict) -> str:
    """Short name of a training setting: 'SGD 0.1 · step · wd 5e-04'."""
    return f"{str(row['optimizer']).upper() if row['optimizer'] == 'sgd' else 'Adam'} {row['lr']:g} · " \
           f"{row['schedule']} · wd {row['weight_decay']:.0e}".replace("wd 0e+00", "wd 0")


def _read_table(path: str | Path, runs: Sequence[str] | None) -> pd.DataFrame:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"table {path} does not exist; `study tables` makes it")
    table = pd.read_csv(path)
    if runs:
        unknown = sorted(set(runs) - set(table["run_id"]))
        if unknown:
            raise ValueError(f"run(s) {unknown[:3]} not in {path} ({len(unknown)} missing)")
        table = table[table["run_id"].isin(runs)]
    return table


def _with_roles(table: pd.DataFrame, key: Sequence[str], evaluations: Sequence[str] | None) -> pd.DataFrame:
    """Keep clean and, per `key` group, one robust evaluation (the first of `evaluations` present:
    MNIST's PGD-40 and CIFAR's PGD-20 share the robustness panel)."""
    prefer = list(evaluations or []) + sorted(set(table["eval"]) - set(evaluations or []))
    keep = []
    for _, group in table.groupby(list(key), sort=False, dropna=False):
        have = set(group["eval"])
        robust = next((e for e in prefer if e in have and e != "clean"), None)
        keep.append(group[group["eval"].isin({"clean", robust})])
    out = pd.concat(keep, ignore_index=True)
    return out.assign(role=np.where(out["eval"] == "clean", "clean", "robust"))


def _discrepancy(table: pd.DataFrame, by: str, evaluations, title: str | None):
    if by not in DISCREPANCY_BY:
        raise ValueError(f"unknown --by {by!r}; valid: {', '.join(DISCREPANCY_BY)}")
    table = table.copy()
    if by == "setting":
        table["setting"] = table.apply(setting_label, axis=1)
    table = _with_roles(table, [by, "method"], evaluations)
    summary = discrepancy_summary(table, by=[by, "method", "role", "eval"])
    pretty = {"dataset": pretty_dataset, "model": pretty_model, "setting": str}[by]
    labels = {}
    for cat, group in summary.groupby(by, sort=False):
        robust = sorted(set(group.loc[group["role"] == "robust", "eval"]))
        labels[str(cat)] = pretty(str(cat)) + (f"\n({', '.join(map(pretty_eval, robust))})" if by == "dataset" else "")
    if by != "dataset":
        robust = sorted(set(summary.loc[summary["role"] == "robust", "eval"]))
        datasets = ", ".join(pretty_dataset(d) for d in sorted(table["dataset"].unique()))
        title = title or f"class-wise discrepancy per {'architecture' if by == 'model' else 'optimization setting'}" \
                         f" · {datasets} · robustness: {', '.join(map(pretty_eval, robust))}"
    return plot_discrepancy(summary, by, labels=labels, title=title or "class-wise discrepancy per dataset")


def _rank(table: pd.DataFrame, dataset: str | None, evaluations, title: str | None):
    if dataset is not None:
        table = table[table["dataset"] == dataset]
    if table.empty or table["dataset"].nunique() != 1:
        raise ValueError("rank agreement compares class accuracies of one dataset; give --dataset")
    table = table.copy()
    table["setting"] = table.apply(setting_label, axis=1)
    varied = [c for c in ("model", "setting") if table[c].nunique() > 1]
    table["config"] = table.apply(
        lambda r: " | ".join([pretty_model(r["model"]) if "model" in varied or not varied else "",
                              pretty_method(r["method"]), r["setting"] if "setting" in varied else ""]).strip(" |")
        .replace(" |  | ", " | "), axis=1)
    table = _with_roles(table, ["run_id"], evaluations)
    panels = {}
    for role, part in table.groupby("role", sort=True):
        wide = class_accuracy_matrix(part, ["config"])
        name = "clean accuracy" if role == "clean" else \
            f"robustness ({', '.join(map(pretty_eval, sorted(part['eval'].unique())))})"
        panels[name] = (rank_agreement(wide, "spearman"), rank_agreement(wide, "kendall"))
    ds = table["dataset"].iloc[0]
    seeds = table["seed"].nunique()
    return plot_rank_agreement(panels, title or f"{pretty_dataset(ds)}: do the same classes lead and lag? "
                                                f"(class accuracies, mean of {seeds} seed{'s' if seeds > 1 else ''})")


def class_groups(dataset: str) -> list[str] | None:
    """Superclass name of every class where the dataset has superclasses (CIFAR-100), else None."""
    from study.data.registry import get_dataset_info

    info = get_dataset_info(dataset)
    if not info.superclass_of:
        return None
    return [info.superclass_names[s] for s in info.superclass_of]


def _class_figure(kind: str, records: Sequence[str | Path], title: str | None):
    if not records:
        raise ValueError(f"figure {kind} needs per-sample records (--records)")
    per_eval: dict[str, list[np.ndarray]] = {}
    meta0 = None
    for path in records:
        frame, meta = read_records(path)
        meta0 = meta0 or meta
        if meta["class_names"] != meta0["class_names"]:
            raise ValueError(f"{path} has other classes than {records[0]}; draw one dataset per figure")
        n = len(meta["class_names"])
        name = meta["evaluation"]["name"]
        matrix = confusion_matrix(frame, n) if kind == "confusion" else logit_cosine_similarity(frame, n)
        per_eval.setdefault(name, []).append(matrix)
    names = meta0["class_names"]
    order = sorted(per_eval, key=lambda e: e != "clean")
    # Seeds: mean of the per-seed matrices (logit scales differ between seeds; each is normalised first).
    panels = {("clean" if e == "clean" else pretty_eval(e)) + (f" · mean of {len(per_eval[e])} seeds"
              if len(per_eval[e]) > 1 else ""): np.nanmean(np.stack(per_eval[e]), axis=0) for e in order}
    cfg = meta0["run_config"]
    heading = title or run_title(cfg["dataset"], cfg["model"], cfg["method"])
    groups = class_groups(cfg["dataset"])
    if kind == "confusion":
        return plot_confusion(panels, names, groups, heading + " · confusion (rows: true class)")
    return plot_logit_similarity(panels, names, groups, heading + " · cosine similarity of mean logits")


def make_explanation_figure(
    kind: str,
    out_stem: str | Path,
    *,
    table: str | Path | None = None,
    records: Sequence[str | Path] | None = None,
    runs: Sequence[str] | None = None,
    by: str | None = None,
    dataset: str | None = None,
    evaluations: Sequence[str] | None = None,
    title: str | None = None,
) -> list[Path]:
    if kind not in EXPLANATION_KINDS:
        raise ValueError(f"unknown figure kind {kind!r}; valid: {', '.join(EXPLANATION_KINDS)}")
    if kind in ("discrepancy", "rank_agreement"):
        if table is None:
            raise ValueError(f"figure {kind} needs --table (results/tables/classwise.csv)")
        rows = _read_table(table, runs)
        if rows.empty:
            raise ValueError(f"no rows for figure {kind} in {table}")
        fig = _discrepancy(rows, by or "dataset", evaluations, title) if kind == "discrepancy" \
            else _rank(rows, dataset, evaluations, title)
    else:
        fig = _class_figure(kind, list(records or []), title)
    return save_figure(fig, out_stem)
