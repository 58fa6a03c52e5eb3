"""Draw one figure of the study from the aggregated tables (what `study figure` runs)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from study.figures.classwise import plot_classwise
from study.figures.epochs import plot_epochs
from study.figures.style import run_title, save_figure
from study.runs import SETTING_COLUMNS

FIGURE_KINDS = ("classwise", "epochs", "discrepancy", "rank_agreement", "confusion", "logit_similarity",
                "mitigation", "policy_epochs")
# Columns that tell two training settings of one (dataset, model, method) apart.


def select_rows(table: pd.DataFrame, dataset: str, model: str, method: str) -> pd.DataFrame:
    rows = table[(table["dataset"] == dataset) & (table["model"] == model) & (table["method"] == method)]
    if "train_data" in rows:  # models trained on constructed datasets have figures of their own
        rows = rows[rows["train_data"] == "original"]
    if rows.empty:
        have = table[["dataset", "model", "method"]].drop_duplicates().to_records(index=False).tolist()
        raise ValueError(f"no rows for dataset={dataset} model={model} method={method}; the table has {have}")
    settings = rows[[c for c in SETTING_COLUMNS if c in rows]].drop_duplicates()
    if len(settings) > 1:
        raise ValueError(
            f"{len(settings)} training settings of {dataset}/{model}/{method} in the table; "
            "a class-wise figure shows one (filter the table first)"
        )
    return rows


def _title(rows: pd.DataFrame, dataset: str, model: str, method: str) -> str:
    title = run_title(dataset=dataset, model=model, method=method)
    variant = str(rows["data_variant"].iloc[0])
    if variant not in ("official", "default"):
        title += f" ({variant} variant of the data)"
    seeds = rows["seed"].nunique()
    return title + f"  ·  {seeds} seed{'s' if seeds > 1 else ''}"


def make_figure(
    kind: str,
    table_path: str | Path,
    out_stem: str | Path,
    *,
    dataset: str | None = None,
    model: str | None = None,
    method: str | None = None,
    evaluations: Sequence[str] | None = None,
    runs: Sequence[str] | None = None,
    records: Sequence[str | Path] | None = None,
    by: str | None = None,
    methods: Sequence[str] | None = None,
) -> list[Path]:
    """One figure. classwise/epochs: one (dataset, model, method), `runs` picks its training
    setting when the study has several; the other kinds: see study.figures.make_explain."""
    from study.figures.robustness_make import ROBUSTNESS_KINDS, make_robustness_figure

    if kind in ROBUSTNESS_KINDS:  # figures 3, 11 and 14 (issue 4)
        return make_robustness_figure(kind, table_path, out_stem, dataset=dataset, model=model, method=method,
                                      evaluations=evaluations, runs=runs)
    if kind not in FIGURE_KINDS:
        raise ValueError(f"unknown figure kind {kind!r}; valid: {', '.join(FIGURE_KINDS)}")
    if kind not in ("classwise", "epochs", "mitigation", "policy_epochs"):
        from study.figures.make_explain import make_explanation_figure

        return make_explanation_figure(kind, out_stem, table=table_path, records=records, runs=runs, by=by,
                                       dataset=dataset, evaluations=evaluations)
    if dataset is None or model is None or method is None:
        raise ValueError(f"figure {kind} needs --dataset, --model and --method")
    table_path = Path(table_path)
    if not table_path.exists():
        raise FileNotFoundError(f"table {table_path} does not exist; `study tables` makes it")
    if kind in ("mitigation", "policy_epochs"):
        return _make_mitigation(kind, table_path, out_stem, dataset, model, methods)
    table = pd.read_csv(table_path)
    if runs:
        table = table[table["run_id"].isin(runs)]
    rows = select_rows(table, dataset, model, method)
    title = _title(rows, dataset, model, method)
    if kind == "classwise":
        if evaluations:
            unknown = sorted(set(evaluations) - set(rows["eval"]))
            if unknown:
                raise ValueError(f"evaluation(s) {unknown} not in the table; it has {sorted(rows['eval'].unique())}")
            rows = rows[rows["eval"].isin(evaluations)]
        fig = plot_classwise(rows, title=title)
    else:
        fig = plot_epochs(rows, title=title)
    return save_figure(fig, out_stem)


def _make_mitigation(kind: str, table_path: Path, out_stem: str | Path, dataset: str, model: str,
                     methods: Sequence[str] | None) -> list[Path]:
    """Figure 13 for one (dataset, model): every method in `methods` (all in the table if None);
    the mitigation figure also writes its table as `<out_stem>.csv`."""
    from study.figures.mitigation import mitigation_table, plot_mitigation, plot_policy_epochs
    from study.io import atomic_path

    table = pd.read_csv(table_path)
    rows = table[(table["dataset"] == dataset) & (table["model"] == model)]
    if rows.empty:
        raise ValueError(f"no rows for dataset={dataset} model={model} in {table_path}")
    methods = list(methods) if methods else list(dict.fromkeys(rows["method"]))
    title = f"{run_title(dataset=dataset, model=model)}  ·  {len(methods)} methods"
    if kind == "policy_epochs":
        return save_figure(plot_policy_epochs(rows, methods, title=title), out_stem)
    summary = mitigation_table(rows, methods)
    with atomic_path(Path(f"{out_stem}.csv")) as tmp:
        summary.to_csv(tmp, index=False)
    return [*save_figure(plot_mitigation(summary, title=title), out_stem), Path(f"{out_stem}.csv")]
