"""The study's figures: one table (`FIGURES`) of what each figure reads, how it is split into
panels, what draws it, its caption and its place in the report; and the figure kinds
(`FIGURE_KINDS`) that `study figure KIND` draws, one per draw function. Everything else that
names a figure is derived from these two tables: the workflow's figure rules
(workflow/rules/common.smk, figures.smk), the choices of `study figure`, the names params.yaml's
`figures` may list (the schema's enum, tools/params_schema.py) and the tests' expectations.

Adding a figure is one `Figure` row here (and a `FigureKind` row when it has a draw function of its
own), plus the code of its draw and panel functions and its caption (workflow/report/<caption>.rst).
A figure that no `study figure KIND` draws (figure 12: it reads the models trained on the
constructed datasets) names its own command and holds the function that command calls.

A draw function is called as `draw(source, out_stem, **options)`: `source` is the table file
(`reads` "table") or the list of per-sample record files ("records"); `options` are every
option of `study figure` (dataset, model, method, evaluations, runs, by, methods, threat_model,
reference, preset, controls), None where not given, those in `needs` given. It returns the files
it wrote.

A figure family is one module, named by its figures (study/figures/figNN_MM_<family>.py): the
draw functions of its kinds and the assembly of their panels' data from the tables and records.
This module imports them, and the `study` command builds its parser from it, so they import
nothing heavy at their top: pandas and their matplotlib drawing (study/figures/<family>.py,
style.py, trust.py, heatmap.py) are imported inside the draw functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from study.figures import panels
from study.figures.fig01_02_classwise import draw_classwise
from study.figures.fig03_11_14_robustness import draw_cfp, draw_corruptions, draw_frl_errors
from study.figures.fig04_06_discrepancy import draw_discrepancy
from study.figures.fig07_epochs import draw_epochs
from study.figures.fig08_rank_agreement import draw_rank_agreement
from study.figures.fig09_10_class_matrices import draw_confusion, draw_logit_similarity
from study.figures.fig12_features import make_features_figure
from study.figures.fig13_mitigation import draw_mitigation, draw_policy_epochs
from study.figures.fig15_17_zoo import draw_zoo_classwise, draw_zoo_gap, draw_zoo_ranks

DATASET_MODEL_METHOD = ("dataset", "model", "method")


@dataclass(frozen=True)
class FigureKind:
    """What `study figure KIND` runs: `draw`, reading a table (--table) or per-sample records
    (--records) that `made_by` writes, given at least the options in `needs`."""

    name: str
    draw: Callable[..., list[Path]]
    reads: str  # "table" (--table) or "records" (--records)
    needs: tuple[str, ...] = ()  # options it cannot do without
    made_by: str = "study tables"  # the command that writes what it reads


_KINDS = (
    # figures 1 and 2: class-wise accuracy and robustness of one (dataset, model, method)
    FigureKind("classwise", draw_classwise, "table", DATASET_MODEL_METHOD),
    # figure 7: class-wise records over the epochs of training
    FigureKind("epochs", draw_epochs, "table", DATASET_MODEL_METHOD),
    # figures 4, 5, 6: class-wise discrepancy per dataset, model or training setting
    FigureKind("discrepancy", draw_discrepancy, "table"),
    # figure 8: rank agreement of class accuracies between the configurations of a dataset
    FigureKind("rank_agreement", draw_rank_agreement, "table"),
    # figures 9 and 10: confusion and logit similarity between classes
    FigureKind("confusion", draw_confusion, "records", made_by="study evaluate"),
    FigureKind("logit_similarity", draw_logit_similarity, "records", made_by="study evaluate"),
    # figures 3, 11, 14: standard and boundary errors (FRL), class false positives, CIFAR-10-C
    FigureKind("frl_errors", draw_frl_errors, "table", DATASET_MODEL_METHOD, "study robustness-tables"),
    FigureKind("cfp", draw_cfp, "table", DATASET_MODEL_METHOD, "study robustness-tables"),
    FigureKind("corruptions", draw_corruptions, "table", DATASET_MODEL_METHOD, "study robustness-tables"),
    # figure 13: mitigation methods (worst vs mean class) and their policies over the epochs
    FigureKind("mitigation", draw_mitigation, "table", DATASET_MODEL_METHOD),
    FigureKind("policy_epochs", draw_policy_epochs, "table", DATASET_MODEL_METHOD),
    # figures 15-17: the RobustBench model zoo, per (dataset, threat model) at its robust evaluation
    FigureKind("zoo_classwise", draw_zoo_classwise, "table", ("evaluations",)),
    FigureKind("zoo_ranks", draw_zoo_ranks, "table", ("evaluations",)),
    FigureKind("zoo_gap", draw_zoo_gap, "table", ("evaluations",)),
)
FIGURE_KINDS: dict[str, FigureKind] = {kind.name: kind for kind in _KINDS}


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
    """One figure of kind `kind` (what `study figure KIND` runs) from a table (or, for the record
    kinds, per-sample records): checks what the kind needs and reads, and calls its draw function.
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
        source: Path | list = list(records)
    else:
        if table_path is None:
            raise ValueError(f"figure {kind} needs --table (`{spec.made_by}` writes it)")
        source = Path(table_path)
        if not source.exists():
            raise FileNotFoundError(f"table {source} does not exist; `{spec.made_by}` makes it")
    return spec.draw(source, out_stem, **options)


# ---------------------------------------------------------------- the study's figures

@dataclass(frozen=True)
class Study:
    """What the figures' panels are chosen from: the runs the workflow planned (common.smk
    builds it; tests build their own). `features` returns figure 12's panels, which name the
    constructed datasets' files; `controls` maps figure 13's methods to each one's control."""

    plan: Sequence[panels.Run]
    robustness_runs: Sequence[panels.Run] = ()  # figures 3 and 11: the robustness groups' runs
    corruption_runs: Sequence[panels.Run] = ()  # figure 14: those evaluated on CIFAR-10-C
    zoo: Sequence[panels.Run] = ()  # figures 15-17: the zoo's runs
    #: the robust evaluation figures 15-17 draw per threat model (zoo.figure_evaluations)
    zoo_evaluations: Mapping[str, str] = field(default_factory=dict)
    classwise_table: str | None = None  # figure 16 draws our PGD-AT runs from the study's class-wise table
    controls: Callable[[list[str]], dict[str, str | None]] | None = None
    features: Callable[[], panels.Panels] = dict


@dataclass(frozen=True)
class Figure:
    """A figure of the study, drawn once per panel by `study <command>`, its files
    results/<preset>/figures/<name>/<stem>.png and .pdf (and its `extra` files)."""

    name: str
    kind: str | None  # its FigureKind (`study figure KIND`); None: a command of its own (`command`)
    reads: str  # the table it draws (a name of the workflow's tables) or "records": its runs' per-sample records
    panels: Callable[[Study], panels.Panels]  # {key: (run ids, options)} of the study
    caption: str  # workflow/report/<caption>.rst, in the HTML report beside the PNG
    category: str  # of the HTML report
    stem: str = "{dataset}__{model}__{method}"  # a panel's file name, from its key
    extra: tuple = ()  # further outputs: (name, suffix after the stem, caption if a figure of the report)
    own_command: str | None = None  # the `study` command of a figure without a kind
    own_draw: Callable[..., list[Path]] | None = None  # what its own command calls (a kind's row holds the others')

    def __post_init__(self) -> None:
        if (self.kind is None) == (self.own_command is None):
            raise ValueError(f"figure {self.name}: give a kind or a command of its own, not both or neither")
        if (self.own_command is None) != (self.own_draw is None):
            raise ValueError(f"figure {self.name}: a command of its own comes with its draw function (own_draw)")
        if self.kind is not None and self.kind not in FIGURE_KINDS:
            raise ValueError(f"figure {self.name}: unknown kind {self.kind!r}; valid: {', '.join(FIGURE_KINDS)}")

    @property
    def draw(self) -> Callable[..., list[Path]]:
        """The function that draws a panel: its kind's, or its own command's."""
        if self.kind:
            return FIGURE_KINDS[self.kind].draw
        if self.own_draw is None:  # (__post_init__: a figure has a kind or a command of its own)
            raise ValueError(f"figure {self.name} has neither a kind nor a draw function of its own")
        return self.own_draw

    @property
    def command(self) -> str:
        """`study COMMAND`: `figure KIND`, or the figure's own command."""
        if self.kind:
            return f"figure {self.kind}"
        if self.own_command is None:  # (__post_init__: a figure has a kind or a command of its own)
            raise ValueError(f"figure {self.name} has neither a kind nor a command of its own")
        return self.own_command


_ACC, _ROBUST, _DISC = "Class-wise accuracy and robustness", "Robustness per class", "Class-wise discrepancy"
_MATRIX, _MITIGATION, _ZOO = "Confusion and class similarity", "Mitigation", "RobustBench model zoo"
_ZOO_STEM = "{dataset}__{group}"
_ROWS = (
    Figure("fig01_classwise_standard", "classwise", "classwise", lambda s: panels.classwise(s.plan, "standard"),
           "classwise", _ACC),
    Figure("fig02_classwise_adversarial", "classwise", "classwise", lambda s: panels.classwise(s.plan, "pgd_at"),
           "classwise", _ACC),
    Figure("fig03_frl_errors", "frl_errors", "frl", lambda s: panels.robustness(s.robustness_runs, "all"),
           "robustness", _ROBUST),
    Figure("fig04_discrepancy_datasets", "discrepancy", "classwise",
           lambda s: panels.discrepancy(s.plan, "datasets", "dataset"), "discrepancy", _DISC, "{group}"),
    Figure("fig05_discrepancy_models", "discrepancy", "classwise",
           lambda s: panels.discrepancy(s.plan, "models", "model"), "discrepancy", _DISC, "{group}"),
    Figure("fig06_discrepancy_optimization", "discrepancy", "classwise",
           lambda s: panels.discrepancy(s.plan, "optimization", "setting"), "discrepancy", _DISC, "{group}"),
    Figure("fig07_epochs", "epochs", "epochs", lambda s: panels.classwise(s.plan, evaluations=False),
           "epochs", "Class-wise records over training"),
    Figure("fig08_rank_agreement", "rank_agreement", "classwise", lambda s: panels.rank_agreement(s.plan),
           "rank_agreement", "Rank agreement of class accuracies", "{dataset}"),
    Figure("fig09_confusion", "confusion", "records", lambda s: panels.class_matrix(s.plan), "class_matrix", _MATRIX),
    Figure("fig10_logit_similarity", "logit_similarity", "records", lambda s: panels.class_matrix(s.plan),
           "class_matrix", _MATRIX),
    Figure("fig11_cfp", "cfp", "cfp", lambda s: panels.robustness(s.robustness_runs, of_method="pgd_at"),
           "robustness", _ROBUST),
    # figure 12 trains models of its own on the constructed datasets: `study features-figure`
    Figure("fig12_features", None, "classwise", lambda s: s.features(), "features", "Robust and non-robust features",
           "{dataset}__{model}", (("examples", "__examples.png", "features_examples"),
                                  ("examples_pdf", "__examples.pdf", None)), own_command="features-figure",
           own_draw=make_features_figure),
    Figure("fig13_mitigation", "mitigation", "classwise", lambda s: panels.mitigation(s.plan, s.controls),
           "mitigation", _MITIGATION, extra=(("table", ".csv", None),)),
    Figure("fig13_policy_epochs", "policy_epochs", "epochs", lambda s: panels.mitigation(s.plan),
           "policy_epochs", _MITIGATION),
    Figure("fig14_corruptions", "corruptions", "corruptions", lambda s: panels.robustness(s.corruption_runs),
           "robustness", _ROBUST),
    Figure("fig15_zoo_classwise", "zoo_classwise", "zoo_classwise", lambda s: panels.zoo(s.zoo, s.zoo_evaluations),
           "zoo_classwise", _ZOO, _ZOO_STEM, (("intervals", ".csv", None),)),
    Figure("fig16_zoo_ranks", "zoo_ranks", "zoo_classwise",
           lambda s: panels.zoo(s.zoo, s.zoo_evaluations, s.classwise_table), "zoo_ranks", _ZOO, _ZOO_STEM),
    Figure("fig17_zoo_gap", "zoo_gap", "zoo_classwise", lambda s: panels.zoo(s.zoo, s.zoo_evaluations),
           "zoo_gap", _ZOO, _ZOO_STEM),
)
#: the study's figures, in the order of the report's categories (its first figure's number)
FIGURES: dict[str, Figure] = {fig.name: fig for fig in _ROWS}
