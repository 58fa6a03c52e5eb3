"""Draw one figure of the study (what `study figure KIND` runs): `make_figure` looks the kind
up in study.figures.registry, checks what it reads, and calls its draw function. The draw
functions of the class-wise (1, 2), epoch (7) and mitigation (13) figures live here."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from study.figures.registry import FIGURE_KINDS
from study.figures.style import run_title, save_figure, table_recipe
from study.names import STUDY_CHECKPOINTS, eval_name, method_name, split_record_name, table_checkpoints
from study.run_directory import SETTING_COLUMNS


def make_figure(
    kind: str,
    table_path: str | Path | None,
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
    threat_model: str | None = None,
    reference: str | Path | None = None,
    preset: str | None = None,
    controls: Sequence[str] | None = None,
) -> list[Path]:
    """One figure of kind `kind` from a table (or, for the record kinds, per-sample records);
    `runs` keeps only those runs (one training setting when the study has several). Figure 13:
    `controls` (`method=control` words, from the workflow's plan) name each method's comparison;
    without them, params.yaml and `preset` do."""
    if kind not in FIGURE_KINDS:
        raise ValueError(f"unknown figure kind {kind!r}; valid: {', '.join(FIGURE_KINDS)}")
    spec = FIGURE_KINDS[kind]
    options = {"dataset": dataset, "model": model, "method": method, "evaluations": evaluations, "runs": runs,
               "by": by, "methods": methods, "threat_model": threat_model, "reference": reference, "preset": preset,
               "controls": controls}
    missing = [f"--{name}" for name in spec.needs if options[name] is None]
    if missing:
        raise ValueError(f"figure {kind} needs {', '.join(missing)}")
    if spec.reads == "records":
        if not records:
            raise ValueError(f"figure {kind} needs per-sample records (--records; `{spec.made_by}` writes them)")
        source = list(records)
    else:
        if table_path is None:
            raise ValueError(f"figure {kind} needs --table (`{spec.made_by}` writes it)")
        source = Path(table_path)
        if not source.exists():
            raise FileNotFoundError(f"table {source} does not exist; `{spec.made_by}` makes it")
    return spec.function()(source, out_stem, **options)


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


def _panel(table_path: Path, dataset: str, model: str, method: str,
           runs: Sequence[str] | None) -> tuple[pd.DataFrame, str]:
    """The rows of one (dataset, model, method) and the figure's title."""
    table = pd.read_csv(table_path)
    if runs:
        table = table[table["run_id"].isin(runs)]
    rows = select_rows(table, dataset, model, method)
    return rows, _title(rows, dataset, model, method)


def draw_classwise(table: Path, out_stem: str | Path, *, dataset: str, model: str, method: str,
                   evaluations: Sequence[str] | None = None, runs: Sequence[str] | None = None, **_) -> list[Path]:
    """Figures 1 and 2: `evaluations` picks the evaluations shown (default: every one)."""
    from study.figures.classwise import plot_classwise

    rows, title = _panel(table, dataset, model, method, runs)
    if evaluations:
        unknown = sorted(set(evaluations) - set(rows["eval"]))
        if unknown:
            raise ValueError(f"evaluation(s) {unknown} not in the table; it has {sorted(rows['eval'].unique())}")
        rows = rows[rows["eval"].isin(evaluations)]
    return save_figure(plot_classwise(rows, title=title), out_stem)


def draw_epochs(table: Path, out_stem: str | Path, *, dataset: str, model: str, method: str,
                runs: Sequence[str] | None = None, **_) -> list[Path]:
    """Figure 7: the epochs table's class-wise records of one (dataset, model, method)."""
    from study.figures.epochs import plot_epochs

    rows, title = _panel(table, dataset, model, method, runs)
    return save_figure(plot_epochs(rows, title=title), out_stem)


def _mitigation_rows(table: Path, dataset: str, model: str,
                     methods: Sequence[str] | None) -> tuple[pd.DataFrame, list[str], str]:
    """Figure 13's rows of one (dataset, model), its methods (all in the table if None), its title."""
    rows = pd.read_csv(table)
    rows = rows[(rows["dataset"] == dataset) & (rows["model"] == model)]
    if "eval" in rows.columns or "checkpoint" in rows.columns:  # the epochs table has neither: no checkpoint
        rows = rows.assign(checkpoint=table_checkpoints(rows))
    if rows.empty:
        raise ValueError(f"no rows for dataset={dataset} model={model} in {table}")
    methods = list(methods) if methods else list(dict.fromkeys(rows["method"]))
    return rows, methods, f"{run_title(dataset=dataset, model=model)}  ·  {len(methods)} methods"


def _with_flagged_seeds(summary: pd.DataFrame, flagged: pd.DataFrame) -> pd.DataFrame:
    """Figure 13's table with `flagged_seeds`: the runs per (method, evaluation, checkpoint) the checks
    flagged, left out of its numbers; a row whose every seed was flagged stays, its numbers empty."""
    if flagged.empty:
        return summary.assign(flagged_seeds=0)
    keys = ["dataset", "model", "method", "eval", "checkpoint"]
    runs = flagged[[*keys, "run_id"]].drop_duplicates()
    runs["eval"] = runs["eval"].map(lambda name: split_record_name(name)[0])
    counts = runs.groupby(keys, sort=False).size().rename("flagged_seeds").reset_index()
    every_seed = counts.merge(summary[keys], on=keys, how="left", indicator=True)
    every_seed = every_seed[every_seed["_merge"] == "left_only"].drop(columns="_merge")
    out = pd.concat([summary.merge(counts, on=keys, how="left"), every_seed], ignore_index=True)
    out["flagged_seeds"] = out["flagged_seeds"].fillna(0).astype(int)
    out["n_seeds"] = out["n_seeds"].fillna(0).astype(int)
    return out


def mitigation_baselines(methods: Sequence[str], params_path: str | Path = "params.yaml",
                         preset: str | None = None) -> dict[str, str | None]:
    """Each method's own-form baseline among `methods` (study.config.present_baseline), from the
    method definitions (`base`, `compare_with`) of params.yaml and `preset` (the demo's fine-tunes
    are compared with `at`); none where params.yaml is not there or does not define a method."""
    from study.config import ConfigError, load_params, present_baseline

    if not Path(params_path).exists():
        return {}
    params = load_params(params_path, {"preset": preset} if preset else None)
    out = {}
    for method in methods:
        try:
            out[method] = present_baseline(params, method, methods)
        except ConfigError:
            out[method] = None
    return out


def _controls(words: Sequence[str]) -> dict[str, str]:
    """`method=control` words as a mapping; a word without '=' is one line naming it."""
    out = {}
    for word in words:
        method, sep, control = word.partition("=")
        if not sep or not method or not control:
            raise ValueError(f"--controls {word!r}: expected METHOD=CONTROL (e.g. trades_cfa=trades_normalized)")
        out[method] = control
    return out


def draw_mitigation(table: Path, out_stem: str | Path, *, dataset: str, model: str,
                    methods: Sequence[str] | None = None, preset: str | None = None,
                    controls: Sequence[str] | None = None, **_) -> list[Path]:
    """Figure 13 for one (dataset, model), and its table beside it as `<out_stem>.csv`."""
    from study.figures.mitigation import mitigation_table, plot_mitigation
    from study.figures.trust import left_out_note, split_counted
    from study.io import atomic_path

    rows, methods, title = _mitigation_rows(table, dataset, model, methods)
    # the published protocol's rows were chosen on the test set: no part of the study's comparison
    rows = rows[rows["checkpoint"].isin(STUDY_CHECKPOINTS)]
    # the trust rule: mitigation_table counts no flagged evaluation; the figure names those it left out
    counted, flagged = split_counted(rows[rows["method"].isin(methods)])
    left_out = left_out_note(flagged, ["method", "eval"], lambda k: f"{method_name(k[0])} · {eval_name(k[1])}",
                             width=45)
    if counted.empty and not flagged.empty:
        raise ValueError(f"figure 13 of {dataset}/{model}: nothing counted is left to draw; {left_out}")
    given = _controls(controls) if controls is not None else None
    baselines = {m: given.get(m) for m in methods} if given is not None else mitigation_baselines(methods,
                                                                                                 preset=preset)
    summary = mitigation_table(rows, methods, baselines)
    with atomic_path(Path(f"{out_stem}.csv")) as tmp:
        _with_flagged_seeds(summary, flagged).to_csv(tmp, index=False)
    recipe = table_recipe(counted[counted["method"].isin(methods)])
    return [*save_figure(plot_mitigation(summary, title=title, left_out=left_out, recipe=recipe), out_stem),
            Path(f"{out_stem}.csv")]


def draw_policy_epochs(table: Path, out_stem: str | Path, *, dataset: str, model: str,
                       methods: Sequence[str] | None = None, **_) -> list[Path]:
    """How the mitigation methods' policies adapt over the epochs (beside figure 13)."""
    from study.figures.mitigation import plot_policy_epochs

    rows, methods, title = _mitigation_rows(table, dataset, model, methods)
    return save_figure(plot_policy_epochs(rows, methods, title=title), out_stem)
