"""Draw figures 4, 5, 6 (discrepancy), 8 (rank agreement), 9 (confusion) and 10 (logit similarity)
from the tables and per-sample records: the draw functions of these kinds in
study.figures.registry (what `study figure KIND` runs for them)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from study.config.spec import ConfigSpec
from study.evaluate.records import read_records
from study.figures.discrepancy import plot_discrepancy
from study.figures.explain import plot_confusion, plot_logit_similarity, plot_rank_agreement
from study.figures.style import (
    display_title,
    reduced_recipe,
    run_title,
    save_figure,
    table_recipe,
)
from study.figures.trust import left_out_note, split_counted
from study.metrics.confusion import confusion_matrix, logit_cosine_similarity
from study.metrics.discrepancy_intervals import discrepancy_summary
from study.metrics.rank import class_accuracy_matrix, rank_agreement
from study.names import dataset_name, eval_name, method_name, model_name

DISCREPANCY_BY = ("dataset", "model", "setting")


def setting_label(row: pd.Series | dict) -> str:
    """Short name of a training setting: 'SGD 0.1 · step · wd 5e-04'."""
    return f"{str(row['optimizer']).upper() if row['optimizer'] == 'sgd' else 'Adam'} {row['lr']:g} · " \
           f"{row['schedule']} · wd {row['weight_decay']:.0e}".replace("wd 0e+00", "wd 0")


def _read_table(path: str | Path, runs: Sequence[str] | None, kind: str) -> pd.DataFrame:
    table = pd.read_csv(path)
    if runs:
        unknown = sorted(set(runs) - set(table["run_id"]))
        if unknown:
            raise ValueError(f"run(s) {unknown[:3]} not in {path} ({len(unknown)} missing)")
        table = table[table["run_id"].isin(runs)]
    if table.empty:
        raise ValueError(f"no rows for figure {kind} in {path}")
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


def _counted(table: pd.DataFrame, kind: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The trust rule (study.figures.trust): the rows that count, and the flagged ones left out
    (after the evaluations are chosen, so a flagged one is named, never silently replaced)."""
    counted, flagged = split_counted(table)
    if counted.empty:
        raise ValueError(f"every evaluation of figure {kind} was flagged or failed by the checks "
                         "(check_status); nothing counted is left to draw")
    return counted, flagged


def _discrepancy(table: pd.DataFrame, by: str, evaluations, title: str | None):
    if by not in DISCREPANCY_BY:
        raise ValueError(f"unknown --by {by!r}; valid: {', '.join(DISCREPANCY_BY)}")
    table = table.copy()
    if by == "setting":
        table["setting"] = table.apply(setting_label, axis=1)
    table, flagged = _counted(_with_roles(table, [by, "method"], evaluations), "discrepancy")
    summary = discrepancy_summary(table, by=[by, "method", "role", "eval"])
    pretty = {"dataset": dataset_name, "model": model_name, "setting": str}[by]
    left_out = left_out_note(flagged, [by, "method", "eval"], lambda k: " · ".join(
        [pretty(str(k[0])), method_name(str(k[1])), eval_name(str(k[2]))]))
    labels = {}
    for cat, group in summary.groupby(by, sort=False):
        robust = sorted(set(group.loc[group["role"] == "robust", "eval"]))
        labels[str(cat)] = pretty(str(cat)) + (f"\n({', '.join(map(eval_name, robust))})" if by == "dataset" else "")
    if by != "dataset":
        robust = sorted(set(summary.loc[summary["role"] == "robust", "eval"]))
        datasets = ", ".join(dataset_name(d) for d in sorted(table["dataset"].unique()))
        title = title or f"class-wise discrepancy per {'architecture' if by == 'model' else 'optimization setting'}" \
                         f" · {datasets} · robustness: {', '.join(map(eval_name, robust))}"
    # the runs counted (one flagged on every evaluation is drawn nowhere, so not described)
    return plot_discrepancy(summary, by, labels=labels, title=title or "class-wise discrepancy per dataset",
                            left_out=left_out, recipe=table_recipe(table))


def _rank(table: pd.DataFrame, dataset: str | None, evaluations, title: str | None):
    if dataset is not None:
        table = table[table["dataset"] == dataset]
    if table.empty or table["dataset"].nunique() != 1:
        raise ValueError("rank agreement compares class accuracies of one dataset; give --dataset")
    table = table.copy()
    table["setting"] = table.apply(setting_label, axis=1)
    varied = [c for c in ("model", "setting") if table[c].nunique() > 1]
    table["config"] = table.apply(
        lambda r: " | ".join([model_name(r["model"]) if "model" in varied or not varied else "",
                              method_name(r["method"]), r["setting"] if "setting" in varied else ""]).strip(" |")
        .replace(" |  | ", " | "), axis=1)
    table, flagged = _counted(_with_roles(table, ["run_id"], evaluations), "rank_agreement")
    left_out = left_out_note(flagged, ["config", "eval"], lambda k: f"{display_title(str(k[0]))} · {eval_name(k[1])}")
    panels = {}
    for role, part in table.groupby("role", sort=True):
        wide = class_accuracy_matrix(part, ["config"])
        if left_out and wide.shape[1] < 2:  # the checks left one configuration: nothing to rank it with
            continue
        name = "clean accuracy" if role == "clean" else \
            f"robustness ({', '.join(map(eval_name, sorted(part['eval'].unique())))})"
        panels[name] = (rank_agreement(wide, "spearman"), rank_agreement(wide, "kendall"))
    if not panels:
        raise ValueError(f"the checks flagged all but one configuration of figure rank_agreement: {left_out}")
    ds = table["dataset"].iloc[0]
    seeds = table["seed"].nunique()
    return plot_rank_agreement(panels, title or f"{dataset_name(ds)}: do the same classes lead and lag? "
                                                f"(class accuracies, mean of {seeds} seed{'s' if seeds > 1 else ''})",
                               left_out=left_out, recipe=table_recipe(table))


def class_groups(dataset: str) -> list[str] | None:
    """Superclass name of every class where the dataset has superclasses (CIFAR-100), else None."""
    from study.data.classes import SUPERCLASSES

    if dataset not in SUPERCLASSES:
        return None
    names, of = SUPERCLASSES[dataset]
    return [names[s] for s in of]


def records_recipe(metas: Sequence[dict]) -> str | None:
    """style.reduced_recipe of the trained runs whose records these are (their run configs'
    epochs and train_per_class); None for a zoo model's records, which name no training."""
    runs = [ConfigSpec.parse(m["run_config"], "a record's run_config").config for m in metas if "run_config" in m]
    trained = [r for r in runs if hasattr(r, "epochs")]
    if not trained:
        return None
    return reduced_recipe([r.epochs for r in trained], [r.train_per_class for r in trained])


def _class_matrices(records: Sequence[str | Path], matrix) -> tuple[dict, list[str], list[str] | None, str,
                                                                    str | None]:
    """Per evaluation, the mean over seeds of `matrix(frame, num_classes)` of each record; the
    class names, their superclasses (or None), the run's title and its reduced-recipe note."""
    per_eval: dict[str, list[np.ndarray]] = {}
    sizes: dict[str, list[int]] = {}
    meta0 = None
    metas = []
    for path in records:
        frame, meta = read_records(path)
        metas.append(meta)
        meta0 = meta0 or meta
        if meta["class_names"] != meta0["class_names"]:
            raise ValueError(f"{path} has other classes than {records[0]}; draw one dataset per figure")
        per_eval.setdefault(meta["evaluation"]["name"], []).append(matrix(frame, len(meta["class_names"])))
        per_class = frame["label"].value_counts()
        sizes.setdefault(meta["evaluation"]["name"], []).append(int(per_class.min()) if len(per_class) else 0)
    order = sorted(per_eval, key=lambda e: e != "clean")
    # A panel scored on fewer test images per class than another (AutoAttack on a subset) names its n:
    # its shares move in steps of 1/n and stand on other images than the full panels'.
    most = max(max(n) for n in sizes.values())
    # Seeds: mean of the per-seed matrices (logit scales differ between seeds; each is normalised first).
    panels = {("clean" if e == "clean" else eval_name(e))
              + (f" · subset: n = {min(sizes[e])} per class" if max(sizes[e]) < most else "")
              + (f" · mean of {len(per_eval[e])} seeds" if len(per_eval[e]) > 1 else ""):
              np.nanmean(np.stack(per_eval[e]), axis=0) for e in order}
    run = ConfigSpec.parse(meta0["run_config"], "a record's run_config").config
    return (panels, meta0["class_names"], class_groups(run.dataset), run_title(run.dataset, run.model, run.method),
            records_recipe(metas))


def draw_discrepancy(table: Path, out_stem: str | Path, *, runs: Sequence[str] | None = None, by: str | None = None,
                     evaluations: Sequence[str] | None = None, title: str | None = None, **_) -> list[Path]:
    """Figures 4, 5, 6: the runs' class-wise discrepancy per dataset, model or setting (`by`)."""
    rows = _read_table(table, runs, "discrepancy")
    return save_figure(_discrepancy(rows, by or "dataset", evaluations, title), out_stem)


def draw_rank_agreement(table: Path, out_stem: str | Path, *, dataset: str | None = None,
                        runs: Sequence[str] | None = None, evaluations: Sequence[str] | None = None,
                        title: str | None = None, **_) -> list[Path]:
    """Figure 8: rank agreement of the class accuracies of one dataset's configurations."""
    rows = _read_table(table, runs, "rank_agreement")
    return save_figure(_rank(rows, dataset, evaluations, title), out_stem)


def draw_confusion(records: Sequence[str | Path], out_stem: str | Path, *, title: str | None = None,
                   **_) -> list[Path]:
    """Figure 9: confusion between classes, one panel per evaluation."""
    panels, names, groups, heading, recipe = _class_matrices(records, confusion_matrix)
    return save_figure(plot_confusion(panels, names, groups, (title or heading) + " · confusion (rows: true class)",
                                      recipe=recipe), out_stem)


def draw_logit_similarity(records: Sequence[str | Path], out_stem: str | Path, *, title: str | None = None,
                          **_) -> list[Path]:
    """Figure 10: cosine similarity of the classes' mean logits, one panel per evaluation."""
    panels, names, groups, heading, recipe = _class_matrices(records, logit_cosine_similarity)
    return save_figure(plot_logit_similarity(panels, names, groups,
                                             (title or heading) + " · cosine similarity of mean logits",
                                             recipe=recipe), out_stem)
