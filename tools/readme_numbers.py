"""The numbers the README quotes, made from the results: the baseline models' class-wise
table (results/<preset>/tables/summary.csv), the demo's targets and whether they were reached
(summary.csv, and the class intervals of classwise.csv), AutoAttack and Square beside PGD
(attacks.csv), the checks (checks.csv), the fairness methods of figure 13 (its table,
results/<preset>/figures/fig13_mitigation/*.csv), with the commit and date of the runs they came from.

`study readme-numbers --tables results/demo/tables --readme README.md` rewrites the block
between the README's `<!-- readme-numbers:start -->` and `<!-- readme-numbers:end -->`
markers, so that no number there is typed by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from study.io import atomic_write_text
from study.labels import eval_name, method_name

START, END = "<!-- readme-numbers:start -->", "<!-- readme-numbers:end -->"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _original(table: pd.DataFrame, dataset: str) -> pd.DataFrame:
    """The table's rows of models trained on the dataset itself (not on a constructed one)."""
    return table[(table["dataset"] == dataset) & (table["train_data"] == "original")]


def baseline_table(summary: pd.DataFrame, dataset: str, evaluations: list[str], methods: list[str]) -> str:
    """One row per (method, evaluation) of the dataset's small_cnn baseline runs."""
    rows = ["| model | evaluation | mean class accuracy | worst class | best class | max - min |",
            "|---|---|---|---|---|---|"]
    runs = _original(summary, dataset)
    for method in methods:
        for ev in evaluations:
            hit = runs[(runs["method"] == method) & (runs["eval"] == ev)]
            if hit.empty:
                continue
            r = hit.iloc[0]
            rows.append(f"| {method_name(method)} | {eval_name(ev)} | {_pct(r['mean'])} "
                        f"| {r['worst_class']} {_pct(r['worst'])} | {r['best_class']} {_pct(r['best'])} "
                        f"| {100 * r['gap']:.1f} pts |")
    return "\n".join(rows)


#: The demo's targets (its preset's comment and docs/methods.md): the mean class accuracy each
#: baseline model must reach, by (method, evaluation).
DEMO_TARGETS = {("standard", "clean"): 0.60, ("pgd_at", "clean"): 0.40, ("pgd_at", "pgd20"): 0.25}


def _interval(row: pd.Series) -> str:
    return f"{_pct(row['acc'])} [{100 * row['ci_lo']:.0f}, {100 * row['ci_hi']:.0f}]"


def target_lines(summary: pd.DataFrame, classwise: pd.DataFrame | None, dataset: str) -> list[str]:
    """Each target with the value reached; the test images per class; whether the 95% intervals
    of the PGD-AT model's best and worst class are apart, per evaluation."""
    runs = _original(summary, dataset)
    reached = []
    for (method, ev), floor in DEMO_TARGETS.items():
        hit = runs[(runs["method"] == method) & (runs["eval"] == ev)]
        if hit.empty:
            continue
        value = float(hit.iloc[0]["mean"])
        reached.append(f"{method_name(method)} {eval_name(ev)} {_pct(value)} (target {100 * floor:.0f}%: "
                       f"{'reached' if value >= floor else 'NOT reached'})")
    lines = ["Targets: " + "; ".join(reached) + "."] if reached else []
    if classwise is None:
        return lines
    rows = _original(classwise, dataset)
    rows = rows[rows["method"] == "pgd_at"]
    if rows.empty:
        return lines
    targets = rows[rows["eval"].isin([ev for _, ev in DEMO_TARGETS])]
    lines.append(f"Test images per class of the targets' evaluations: {int(targets['n'].min())}.")
    parts = []
    for ev in ("clean", "pgd20"):
        part = rows[rows["eval"] == ev]
        if part.empty:
            continue
        best, worst = part.loc[part["acc"].idxmax()], part.loc[part["acc"].idxmin()]
        apart = worst["ci_hi"] < best["ci_lo"]
        parts.append(f"{eval_name(ev)}: best {best['class_name']} {_interval(best)} vs worst "
                     f"{worst['class_name']} {_interval(worst)}, {'apart' if apart else 'OVERLAPPING'}")
    if parts:
        lines.append("PGD-AT's best and worst class, 95% Wilson intervals: " + "; ".join(parts) + ".")
    return lines


def mitigation_table(table: pd.DataFrame) -> str:
    """Figure 13's numbers: per method and evaluation, the mean and the worst class with their
    95% intervals, and the change against the method each is compared with."""
    rows = ["| method | evaluation | mean class accuracy | worst class | change against the control (mean, worst) |",
            "|---|---|---|---|---|"]
    for _, r in table.iterrows():
        change = "" if pd.isna(r.get("delta_mean")) else (
            f"{100 * r['delta_mean']:+.1f}, {100 * r['delta_worst']:+.1f} pts vs {method_name(r['compare_with'])}")
        rows.append(f"| {method_name(r['method'])} | {eval_name(r['eval'])} | {_pct(r['mean'])} "
                    f"[{100 * r['mean_lo']:.0f}, {100 * r['mean_hi']:.0f}] | {r['worst_class']} {_pct(r['worst'])} "
                    f"[{100 * r['worst_lo']:.0f}, {100 * r['worst_hi']:.0f}] | {change} |")
    return "\n".join(rows)


def attack_sentence(attacks: pd.DataFrame, dataset: str, method: str) -> str:
    """AutoAttack's and Square's robust accuracy of one run, where the results have them."""
    runs = attacks[(attacks["dataset"] == dataset) & (attacks["method"] == method)]
    parts = []
    for ev in ("autoattack", "square"):
        hit = runs[runs["eval"] == ev]
        if not hit.empty:
            parts.append(f"{eval_name(ev)}: {_pct(hit.iloc[0]['acc'])} of {int(hit.iloc[0]['n'])} images")
    return f"{method_name(method)} under " + "; ".join(parts) + "." if parts else ""


def checks_sentence(checks: pd.DataFrame, path: Path) -> str:
    counts = checks["status"].value_counts().to_dict() if "status" in checks else {}
    listed = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    return f"False-robustness checks: {listed} (`{path.as_posix()}`)." if listed else ""


def provenance(runs_dir: Path, run_ids: list[str]) -> str:
    """The commit the runs were trained at and the date of the newest run."""
    commits, dates = set(), []
    for run_id in run_ids:
        meta = runs_dir / run_id / "meta.json"
        if meta.exists():
            commits.add(json.loads(meta.read_text()).get("git_commit", "unknown")[:7])
            dates.append(pd.Timestamp(meta.stat().st_mtime, unit="s").strftime("%Y-%m-%d"))
    return f"commit {', '.join(sorted(commits)) or 'unknown'}, {max(dates) if dates else 'unknown date'}"


def readme_block(tables: Path, runs_dir: Path, dataset: str = "cifar10",
                 methods: tuple[str, ...] = ("standard", "pgd_at"),
                 evaluations: tuple[str, ...] = ("clean", "pgd20"), figures: Path | None = None) -> str:
    """The block: `figures` (default: beside `tables`) is where figure 13's table is looked for."""
    summary = pd.read_csv(tables / "summary.csv")
    classwise = pd.read_csv(tables / "classwise.csv") if (tables / "classwise.csv").exists() else None
    lines = [baseline_table(summary, dataset, list(evaluations), list(methods)), ""]
    lines += target_lines(summary, classwise, dataset)
    if (tables / "attacks.csv").exists():
        sentence = attack_sentence(pd.read_csv(tables / "attacks.csv"), dataset, methods[-1])
        lines += [sentence] if sentence else []
    if (tables / "checks.csv").exists():
        sentence = checks_sentence(pd.read_csv(tables / "checks.csv"), tables / "checks.csv")
        lines += [sentence] if sentence else []
    mitigation = sorted(((figures or tables.parent / "figures") / "fig13_mitigation").glob(f"{dataset}__*.csv"))
    if mitigation:
        lines += ["", "Figure 13, the fairness methods against their control:", "",
                  mitigation_table(pd.read_csv(mitigation[0]))]
    run_ids = summary[(summary["dataset"] == dataset) & summary["method"].isin(methods)]["run_id"].unique().tolist()
    lines += ["", f"(Made by `study readme-numbers` from `{tables}`; runs of {provenance(runs_dir, run_ids)}.)"]
    return "\n".join(lines)


def update_readme(readme: Path, block: str) -> None:
    """Replace what stands between the markers; ValueError naming the file if they are missing."""
    text = readme.read_text()
    if START not in text or END not in text or text.index(START) > text.index(END):
        raise ValueError(f"{readme} has no {START} ... {END} block to fill")
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    atomic_write_text(readme, f"{head}{START}\n{block}\n{END}{tail}")
