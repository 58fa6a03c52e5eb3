"""The numbers the README quotes, made from the results: the baseline models' class-wise
table (results/tables/summary.csv), AutoAttack and Square beside PGD (attacks.csv), the
checks (checks.csv), with the commit and date of the runs they came from.

`study readme-numbers --tables results/tables --readme README.md` rewrites the block
between the README's `<!-- readme-numbers:start -->` and `<!-- readme-numbers:end -->`
markers, so that no number there is typed by hand."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from study.names import eval_name, method_name

START, END = "<!-- readme-numbers:start -->", "<!-- readme-numbers:end -->"


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def baseline_table(summary: pd.DataFrame, dataset: str, evaluations: list[str], methods: list[str]) -> str:
    """One row per (method, evaluation) of the dataset's small_cnn baseline runs."""
    rows = ["| model | evaluation | mean class accuracy | worst class | best class | max - min |",
            "|---|---|---|---|---|---|"]
    runs = summary[(summary["dataset"] == dataset) & (summary["train_data"] == "original")]
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


def attack_sentence(attacks: pd.DataFrame, dataset: str, method: str) -> str:
    """AutoAttack's and Square's robust accuracy of one run, where the results have them."""
    runs = attacks[(attacks["dataset"] == dataset) & (attacks["method"] == method)]
    parts = []
    for ev in ("autoattack", "square"):
        hit = runs[runs["eval"] == ev]
        if not hit.empty:
            parts.append(f"{eval_name(ev)}: {_pct(hit.iloc[0]['acc'])} of {int(hit.iloc[0]['n'])} images")
    return f"{method_name(method)} under " + "; ".join(parts) + "." if parts else ""


def checks_sentence(checks: pd.DataFrame) -> str:
    counts = checks["status"].value_counts().to_dict() if "status" in checks else {}
    listed = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    return f"False-robustness checks: {listed} (`results/tables/checks.csv`)." if listed else ""


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
                 evaluations: tuple[str, ...] = ("clean", "pgd20")) -> str:
    summary = pd.read_csv(tables / "summary.csv")
    lines = [baseline_table(summary, dataset, list(evaluations), list(methods)), ""]
    if (tables / "attacks.csv").exists():
        sentence = attack_sentence(pd.read_csv(tables / "attacks.csv"), dataset, methods[-1])
        lines += [sentence] if sentence else []
    if (tables / "checks.csv").exists():
        sentence = checks_sentence(pd.read_csv(tables / "checks.csv"))
        lines += [sentence] if sentence else []
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
    readme.write_text(f"{head}{START}\n{block}\n{END}{tail}")
