"""Aggregate the records of many runs into the study's tables (results/<preset>/tables/).

Every number comes from the per-sample evaluation records and the per-epoch records;
nothing is recomputed from models here. Every row carries the `checkpoint` its evaluation is of
(`last`, or `best` on validation; `eval` is the record's name, study.record_names.record_name). Given
the runs' checks.json files, every row carries its evaluation's `check_status` and
`checks_not_passed`, and the rule of study.metrics.trust applies: a flagged or failed
evaluation stays in classwise.csv and summary.csv, marked, but its samples are not counted in the seed aggregates
(classwise_seeds.csv, `flagged_seeds` says how many were left out) or the headline metrics.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pandas as pd

from study.config.spec import ConfigSpec
from study.config.types import AveragingPolicy, RunConfig, ZooRunConfig
from study.evaluate.records import read_records
from study.io import atomic_path, atomic_write_json
from study.labels import zoo_model_name
from study.metrics.classwise import classwise_table, seed_aggregate, summary_table
from study.metrics.trust import not_counted, read_checks, trust_of
from study.record_names import HEADLINE_FILE, checkpoint_of, metrics_stem
from study.run_directory import CONFIG_FILE, SETTING_COLUMNS, identity, read_run_config

#: the columns a seed aggregate is keyed by
SEED_KEYS = ["dataset", "data_variant", "model", "method", *SETTING_COLUMNS, "eval", "checkpoint"]


def build_tables(
    records: Iterable[str | Path],
    epochs: Iterable[str | Path],
    out_dir: str | Path,
    metrics_dir: str | Path | None = None,
    checks: Iterable[str | Path] = (),
) -> dict[str, Path]:
    """From per-sample records (parquet, self-describing), epochs.csv files (beside their
    run's config.json) and the runs' checks.json files, write classwise.csv, summary.csv
    (with `averaged_epochs`, for the runs whose epochs.csv is given), classwise_seeds.csv, epochs.csv;
    and, given `metrics_dir`, the headline metrics there (write_headline_metrics)."""
    out_dir = Path(out_dir)
    verdicts, _ = read_checks(checks)
    blocks = []
    for path in map(Path, records):
        frame, meta = read_records(path)
        name = meta["evaluation"]["name"]
        run = ConfigSpec.parse(meta["run_config"], f"{path}: run_config").config  # a record's metadata
        ident = {**identity(meta["run_id"], run), "eval": name,
                 "checkpoint": checkpoint_of(meta["evaluation"]), **trust_of(verdicts, meta["run_id"], name)}
        blocks.append(classwise_table([(ident, frame)], meta["class_names"]))
    if not blocks:
        raise FileNotFoundError("no evaluation records given (results/evaluations/<run>/<evaluation>.parquet)")
    classwise = pd.concat(blocks, ignore_index=True)
    summary = summary_table(classwise)
    seeds = counted_seed_aggregate(classwise)

    epoch_frames = []
    averaged: dict[str, float] = {}
    for path in map(Path, epochs):
        if not (path.parent / CONFIG_FILE).exists():
            raise FileNotFoundError(f"{path} has no config.json beside it; is it a run directory?")
        run = read_run_config(path.parent).config
        ident = identity(path.parent.name, run)
        frame = pd.read_csv(path)
        averaged[path.parent.name] = averaged_epochs(run, frame)
        # a record of the epoch named like a setting of the run (`lr`: the epoch's learning rate
        # beside the run's configured one) keeps its value as epoch_<name>, one column per name
        frame = frame.rename(columns={c: f"epoch_{c}" for c in frame.columns if c in ident})
        epoch_frames.append(frame.assign(**ident)[[*ident, *frame.columns]])
    epochs_df = pd.concat(epoch_frames, ignore_index=True) if epoch_frames else pd.DataFrame()
    # which rows of a weight-averaging method are not averaged at all (0: FAWA took no epoch in)
    summary["averaged_epochs"] = summary["run_id"].map(averaged).astype(float)

    paths = {name: out_dir / f"{name}.csv" for name in ("classwise", "summary", "classwise_seeds", "epochs")}
    for name, frame in zip(paths, (classwise, summary, seeds, epochs_df), strict=True):
        with atomic_path(paths[name]) as tmp:
            frame.to_csv(tmp, index=False)
    if metrics_dir is not None:
        paths.update({f"metrics {p.stem}": p for p in write_headline_metrics(summary, metrics_dir)})
    return paths


def averaged_epochs(run: RunConfig | ZooRunConfig, epochs: pd.DataFrame) -> float:
    """How many epochs a run's weight averaging (EMA, FAWA) took in, from its epochs.csv; NaN
    for a method that does not average. 0 is a run whose averaging never accepted an epoch:
    its model is the un-averaged one (the engine warned, validation.json says so)."""
    averaging = run.method_config.averaging if isinstance(run, RunConfig) else None
    kind = (averaging or AveragingPolicy()).type
    if kind == "none" or "averaged" not in epochs:
        return float("nan")
    return float(epochs.loc[epochs["averaged"] == 1, "epoch"].nunique())


def counted_seed_aggregate(classwise: pd.DataFrame) -> pd.DataFrame:
    """The class-wise table over seeds, counting no sample of a flagged or failed evaluation
    (its seed is left out of the mean and the interval); `flagged_seeds` counts those left out."""
    flagged = not_counted(classwise)
    kept = classwise.copy()
    kept.loc[flagged, ["acc", "correct"]] = np.nan
    kept.loc[flagged, "n"] = 0
    seeds = seed_aggregate(kept, by=SEED_KEYS)
    keys = [*SEED_KEYS, "class"]
    counts = flagged.groupby([classwise[k] for k in keys], sort=False, dropna=False).sum().rename("flagged_seeds")
    return seeds.merge(counts.reset_index(), on=keys, how="left")


def headline_metrics(summary: pd.DataFrame) -> dict[str, dict[str, dict]]:
    """Seed-averaged mean and worst-class accuracy per model (dataset, model, method, training
    data) and evaluation, for DVC: {metrics_stem: {eval: {mean, worst, worst_class}}}, one file
    per model, so that `dvc metrics show` prints a row per model and three columns per
    evaluation rather than one row of every number. `worst_class` is the class that is worst in
    most of the counted seeds (the first such seed's on a tie). Flagged or failed evaluations are
    not counted (`flagged` says how many; with none counted, the numbers are null)."""
    out: dict[str, dict[str, dict]] = {}
    keys = ["dataset", "model", "method", "train_data", "eval"]
    for (*model_key, name), group in summary.groupby(keys, sort=True):
        left_out = not_counted(group)
        kept = group[~left_out]
        counted = len(kept) > 0
        out.setdefault(metrics_stem(*model_key), {})[str(name)] = {
            "mean": round(float(np.mean(kept["mean"])), 4) if counted else None,
            "worst": round(float(np.mean(kept["worst"])), 4) if counted else None,
            "worst_class": str(kept["worst_class"].value_counts(sort=False).idxmax()) if counted else None,
            **({"flagged": int(left_out.sum())} if left_out.any() else {}),
        }
    return out


def headline_numbers(summary: pd.DataFrame) -> dict[str, float | None]:
    """PGD-AT's seed-averaged mean (`robust`) and worst-class (`worst`) accuracy under the PGD attack
    the report's front page quotes, of the model it states the finding with (study.front_page: CIFAR-10
    where the study has it, the last checkpoint, trained on the original data); null without one."""
    from study.front_page import ADVERSARIAL, headline_attack

    rows = summary[(summary["method"] == ADVERSARIAL) & ~summary["eval"].str.contains("@")]
    if "train_data" in rows:
        rows = rows[rows["train_data"].fillna("original") == "original"]
    attack = headline_attack(rows) if not rows.empty else None
    if attack is None:
        return {"robust": None, "worst": None}
    datasets = list(dict.fromkeys(rows["dataset"]))
    dataset = "cifar10" if "cifar10" in datasets else datasets[0]
    model = sorted(rows[rows["dataset"] == dataset]["model"].unique())[0]
    part = rows[(rows["dataset"] == dataset) & (rows["model"] == model) & (rows["eval"] == attack)]
    part = part[~not_counted(part)]
    if part.empty:
        return {"robust": None, "worst": None}
    return {"robust": round(float(np.mean(part["mean"])), 4), "worst": round(float(np.mean(part["worst"])), 4)}


def write_headline_metrics(summary: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    """One JSON file of headline metrics per model in `out_dir` (headline_metrics), and the study's
    headline in two numbers (HEADLINE_FILE); a file of an earlier study that this one does not write
    again is removed, since DVC shows every file of the folder and a stale model would read as a
    result of this one."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out_dir / HEADLINE_FILE, headline_numbers(summary))
    written = [out_dir / HEADLINE_FILE]
    for stem, evaluations in headline_metrics(summary).items():
        path = out_dir / f"{stem}.json"
        atomic_write_json(path, evaluations)
        written.append(path)
    for stale in set(out_dir.glob("*.json")) - set(written):
        stale.unlink()
    return written


#: test images RobustBench evaluates on (ImageNet: its 5,000-image validation subset)
ROBUSTBENCH_TEST_SIZES = {"cifar10": 10_000, "cifar100": 10_000, "imagenet": 5_000}
ZOO_TOLERANCE_PP = 0.5


def _zoo_id_fields(run_id: str) -> tuple[str, str, str]:
    """(RobustBench dataset, threat model, model ID) of a zoo run id (study.config.zoo.zoo_run_id)."""
    _, dataset, threat, rest = run_id.split("-", 3)
    return dataset, threat, rest.split("-on-")[0]


def zoo_table(classwise: str | Path, out: str | Path, tolerance_pp: float = ZOO_TOLERANCE_PP) -> Path:
    """Our accuracy of every zoo model and evaluation beside RobustBench's reported one
    (clean beside clean, AutoAttack beside its robust accuracy), flagged where they differ by
    more than `tolerance_pp` points on RobustBench's full test set."""
    from study.models.zoo import reported_accuracy

    rows = pd.read_csv(classwise)
    reported = reported_accuracy()
    per = rows.groupby(["run_id", "dataset", "model", "eval"], sort=False)[["n", "correct"]].sum().reset_index()
    out_rows = []
    for r in per.itertuples(index=False):
        dataset, threat, name = _zoo_id_fields(r.run_id)
        kind = "clean" if r.eval == "clean" else "robust" if str(r.eval).startswith("autoattack") else None
        theirs = reported.get((dataset, threat, name), {})
        ours = 100 * r.correct / r.n if r.n else float("nan")
        ref = theirs.get(kind) if kind else None
        full = r.dataset == dataset and r.n == ROBUSTBENCH_TEST_SIZES.get(dataset)
        diff = None if ref is None else round(ours - ref, 2)
        out_rows.append({
            "robustbench_dataset": dataset, "threat_model": threat, "name": name, "model_name": zoo_model_name(name),
            "evaluated_on": r.dataset, "eval": r.eval, "n": int(r.n), "ours_pct": round(ours, 2),
            "reported_clean_pct": theirs.get("clean"), "reported_robust_pct": theirs.get("robust"),
            "difference_pp": diff, "full_test_set": bool(full),
            "flag": bool(full and kind == "robust" and diff is not None and abs(diff) > tolerance_pp),
        })
    with atomic_path(out) as tmp:
        pd.DataFrame(out_rows).to_csv(tmp, index=False)
    return Path(out)
