"""Figure 13: the mitigation methods of one (dataset, model), their worst against their mean
class (the class-wise table) and their policies over the epochs (the epochs table), each method
beside its control; the drawing is study.figures.mitigation's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from study.checkpoints import STUDY_CHECKPOINTS
from study.labels import eval_name, method_name
from study.record_names import split_record_name, table_checkpoints

if TYPE_CHECKING:  # the figure catalog imports this module; pandas is imported where a figure is drawn
    import pandas as pd


def _mitigation_rows(table: Path, dataset: str, model: str,
                     methods: Sequence[str] | None) -> tuple[pd.DataFrame, list[str], str]:
    """Figure 13's rows of one (dataset, model), its methods (all in the table if None), its title."""
    import pandas as pd

    from study.figures.style import run_title

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
    import pandas as pd

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
    from study.figures.style import save_figure, table_recipe
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
    from study.figures.style import save_figure

    rows, methods, title = _mitigation_rows(table, dataset, model, methods)
    return save_figure(plot_policy_epochs(rows, methods, title=title), out_stem)
