"""The landing text of the study's HTML report (`results/<preset>/report.html`): the finding with its
headline numbers, read from the class-wise table (results/<preset>/tables/classwise.csv), whether the runs
used a reduced recipe, the reproduction report's verdicts, and links to the headline figure, the
reproduction table and every category of the report, in the study's order.

`study front-page` writes it as reStructuredText (results/<preset>/report_front.rst); the Snakefile's
`report:` directive takes it once it exists, so `snakemake --report results/<preset>/report.html` opens on
the finding. Nothing in it is typed by hand: a rerun with other results says other numbers."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import pandas as pd

from study.labels import dataset_name, eval_name, method_name, model_name
from study.published import FEWEST_PUBLISHED_EPOCHS, PUBLISHED_EPOCHS
from study.record_names import split_record_name

#: the methods whose contrast is the finding: standard training and PGD-AT
STANDARD, ADVERSARIAL = "standard", "pgd_at"
#: the line of results/<preset>/reproduction.md that counts its verdicts (study.reproduction.render)
VERDICTS_PREFIX = "Claims: "


@dataclass(frozen=True)
class ClassRange:
    """The weakest and strongest class of one model under one evaluation, means over seeds."""

    weakest: str
    weakest_acc: float
    strongest: str
    strongest_acc: float
    mean: float


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def headline_rows(classwise: pd.DataFrame) -> pd.DataFrame:
    """The last-checkpoint rows of models trained on a real dataset by standard training or PGD-AT:
    CIFAR-10 where the table has it (the study's dataset), else its first dataset; the model that
    has a PGD-AT run."""
    checkpoint = classwise["checkpoint"] if "checkpoint" in classwise else classwise["eval"].map(
        lambda name: split_record_name(name)[1])
    rows = classwise[(checkpoint == "last") & classwise["method"].isin([STANDARD, ADVERSARIAL])]
    if "train_data" in rows:
        rows = rows[rows["train_data"].fillna("original") == "original"]
    adversarial = rows[rows["method"] == ADVERSARIAL]
    if adversarial.empty:
        raise ValueError(f"the class-wise table has no last-checkpoint {ADVERSARIAL} run to state the finding with")
    datasets = list(dict.fromkeys(adversarial["dataset"]))
    dataset = "cifar10" if "cifar10" in datasets else datasets[0]
    model = sorted(adversarial[adversarial["dataset"] == dataset]["model"].unique())[0]
    return rows[(rows["dataset"] == dataset) & (rows["model"] == model)]


def class_range(rows: pd.DataFrame, method: str, evaluation: str) -> ClassRange | None:
    """The class range of `method` under `evaluation`, each class's accuracy averaged over seeds."""
    part = rows[(rows["method"] == method) & (rows["eval"] == evaluation) & rows["acc"].notna()]
    if part.empty:
        return None
    by_class = part.groupby("class", sort=True).agg(name=("class_name", "first"), acc=("acc", "mean"))
    low, high = by_class.loc[by_class["acc"].idxmin()], by_class.loc[by_class["acc"].idxmax()]
    return ClassRange(str(low["name"]), float(low["acc"]), str(high["name"]), float(high["acc"]),
                      float(by_class["acc"].mean()))


def headline_attack(rows: pd.DataFrame) -> str | None:
    """The PGD evaluation of PGD-AT's runs that the finding quotes: PGD-20 where evaluated, else the
    PGD evaluation with the most steps in its name."""
    names = sorted({e for e in rows[rows["method"] == ADVERSARIAL]["eval"] if e.startswith("pgd")})
    if not names:
        return None
    return "pgd20" if "pgd20" in names else max(names, key=lambda e: (len(e), e))


def reduced_recipe(rows: pd.DataFrame) -> str:
    """How the headline runs were trained at a smaller scale than the published recipe ('' if not):
    fewer epochs than the shortest published schedule, as the figures' subtitle decides."""
    parts = []
    epochs = int(rows["epochs"].max()) if "epochs" in rows else PUBLISHED_EPOCHS
    if epochs < FEWEST_PUBLISHED_EPOCHS:
        parts.append(f"{epochs} epochs, not {PUBLISHED_EPOCHS}")
    if "train_per_class" in rows and rows["train_per_class"].notna().any():
        parts.append(f"{int(rows['train_per_class'].max()):,} training images per class")
    return "; ".join(parts)


def verdict_line(reproduction_md: str) -> str:
    """The reproduction report's count of verdicts ('' when it has none)."""
    return next((line for line in reproduction_md.splitlines() if line.startswith(VERDICTS_PREFIX)), "")


def _result_link(text: str, path: str) -> str:
    """A link that selects one result of the report and shows it, as the result's own view button does
    (Snakemake's report shows an image or an HTML page inline: `content` img or html), beside its
    description in the menu."""
    key = quote(path, safe="/")
    content = "img" if Path(path).suffix.lower() in {".png", ".jpg", ".jpeg", ".svg"} else "html"
    return (f"`{text} <javascript:app.setView({{navbarMode:'resultinfo',resultPath:'{key}',"
            f"content:'{content}',contentPath:results['{key}'].data_uri}})>`_")


def _category_link(name: str) -> str:
    return f"`{name} <javascript:app.showCategory('{quote(name, safe='')}')>`_"


def front_page(classwise: pd.DataFrame, reproduction_md: str, reproduction_page: str,
               headline_figures: Sequence[str], categories: Sequence[str], preset: str) -> str:
    """The landing text as reStructuredText."""
    rows = headline_rows(classwise)
    first = rows.iloc[0]
    dataset, model = str(first["dataset"]), str(first["model"])
    seeds = int(rows["seed"].nunique()) if "seed" in rows else 1
    attack = headline_attack(rows)
    robust = class_range(rows, ADVERSARIAL, attack) if attack else None
    adv_clean, std_clean = class_range(rows, ADVERSARIAL, "clean"), class_range(rows, STANDARD, "clean")
    title = "Class-wise robustness: the finding"
    lines = [title, "=" * len(title), "",
             f"Preset ``{preset}``: {dataset_name(dataset)}, {model_name(model)}, "
             + (f"{seeds} seeds (class accuracies are means over them)." if seeds > 1 else "one seed."), ""]
    finding = ["Adversarial training leaves some classes far behind, even on balanced data."]
    if robust is not None and attack:
        finding.append(f"Under {eval_name(attack)}, {method_name(ADVERSARIAL)}'s weakest class is **{robust.weakest} "
                       f"at {_pct(robust.weakest_acc)}** and its strongest {robust.strongest} at "
                       f"{_pct(robust.strongest_acc)} (mean {_pct(robust.mean)}).")
    if adv_clean is not None:
        finding.append(f"On clean images its weakest class is {adv_clean.weakest} at {_pct(adv_clean.weakest_acc)} "
                       f"against {adv_clean.strongest} at {_pct(adv_clean.strongest_acc)}.")
    if std_clean is not None:
        finding.append(f"{method_name(STANDARD)} training is already unequal: {std_clean.weakest} "
                       f"{_pct(std_clean.weakest_acc)} to {std_clean.strongest} {_pct(std_clean.strongest_acc)} "
                       f"on clean images (mean {_pct(std_clean.mean)}).")
    lines += [" ".join(finding), ""]
    reduced = reduced_recipe(rows)
    if reduced:
        lines += [f"These runs use a reduced recipe ({reduced}): they show the direction and the class "
                  "ranking, not the published sizes.", ""]
    verdicts = verdict_line(reproduction_md)
    lines += [f"Against the published claims ({_result_link('the reproduction table', reproduction_page)}): "
              + (verdicts or "no row compared.")]
    # figure 2's panel of the finding's dataset and model (its stem: dataset__model__method)
    panels = [f for f in headline_figures if Path(f).stem.endswith(f"__{ADVERSARIAL}")]
    headline = next((f for f in panels if Path(f).stem.startswith(f"{dataset}__{model}__")), None)
    if headline:
        text = f"class-wise accuracy and robustness of {method_name(ADVERSARIAL)}"
        lines += ["", f"The headline figure: {_result_link(text, headline)}."]
    lines += ["", "The results, in the study's order: " + ", ".join(_category_link(c) for c in categories) + ".", "",
              "Every number is computed from per-sample evaluation records; intervals are 95% Wilson "
              "intervals over test samples for one seed, and over several seeds (scored on the same test "
              "images) a t interval over seeds combined with one seed's Wilson interval.", ""]
    return "\n".join(lines)


def write_front_page(classwise_csv: str | Path, reproduction: str | Path, out: str | Path,
                     headline_figures: Sequence[str], categories: Sequence[str], preset: str,
                     reproduction_page: str | Path | None = None) -> Path:
    """Write the landing text (results/<preset>/report_front.rst). Its link to the reproduction table opens
    `reproduction_page` (the HTML page the report holds), or the markdown without one."""
    from study.io import atomic_write_text

    classwise_path, reproduction_path = Path(classwise_csv), Path(reproduction)
    page = Path(reproduction_page) if reproduction_page is not None else reproduction_path
    for path in (classwise_path, reproduction_path, page):
        if not path.exists():
            raise FileNotFoundError(f"{path} does not exist: build it first (`snakemake ... {path}`)")
    text = front_page(pd.read_csv(classwise_path), reproduction_path.read_text(), str(page),
                      headline_figures, categories, preset)
    atomic_write_text(out, text)
    return Path(out)
