"""The figure kinds of `study figure KIND`: one table from a kind to the function that draws
it and what it reads. Adding a kind is one entry here and its draw function.

A draw function is called as `draw(source, out_stem, **options)`: `source` is the table file
(`reads` "table") or the list of per-sample record files ("records"); `options` are every
option of `study figure` (dataset, model, method, evaluations, runs, by, methods,
threat_model, reference), None where
not given, those in `needs` given. It returns the files it wrote.

This module imports nothing heavy (the `study` command builds its parser from it); a kind's
plotting code is imported when the kind is drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import import_module

DATASET_MODEL_METHOD = ("dataset", "model", "method")


@dataclass(frozen=True)
class FigureKind:
    draw: str  # "module:function"
    reads: str  # "table" (--table) or "records" (--records)
    needs: tuple[str, ...] = ()  # options it cannot do without
    made_by: str = "study tables"  # the command that writes what it reads

    def function(self) -> Callable:
        module, name = self.draw.split(":")
        return getattr(import_module(module), name)


FIGURE_KINDS: dict[str, FigureKind] = {
    # figures 1 and 2: class-wise accuracy and robustness of one (dataset, model, method)
    "classwise": FigureKind("study.figures.make:draw_classwise", "table", DATASET_MODEL_METHOD),
    # figure 7: class-wise records over the epochs of training
    "epochs": FigureKind("study.figures.make:draw_epochs", "table", DATASET_MODEL_METHOD),
    # figures 4, 5, 6: class-wise discrepancy per dataset, model or training setting
    "discrepancy": FigureKind("study.figures.make_explain:draw_discrepancy", "table"),
    # figure 8: rank agreement of class accuracies between the configurations of a dataset
    "rank_agreement": FigureKind("study.figures.make_explain:draw_rank_agreement", "table"),
    # figures 9 and 10: confusion and logit similarity between classes
    "confusion": FigureKind("study.figures.make_explain:draw_confusion", "records", made_by="study evaluate"),
    "logit_similarity": FigureKind("study.figures.make_explain:draw_logit_similarity", "records",
                                   made_by="study evaluate"),
    # figures 3, 11, 14: standard and boundary errors (FRL), class false positives, CIFAR-10-C
    "frl_errors": FigureKind("study.figures.robustness_make:draw_frl_errors", "table", DATASET_MODEL_METHOD,
                             "study robustness-tables"),
    "cfp": FigureKind("study.figures.robustness_make:draw_cfp", "table", DATASET_MODEL_METHOD,
                      "study robustness-tables"),
    "corruptions": FigureKind("study.figures.robustness_make:draw_corruptions", "table", DATASET_MODEL_METHOD,
                              "study robustness-tables"),
    # figure 13: mitigation methods (worst vs mean class) and their policies over the epochs
    "mitigation": FigureKind("study.figures.make:draw_mitigation", "table", DATASET_MODEL_METHOD),
    "policy_epochs": FigureKind("study.figures.make:draw_policy_epochs", "table", DATASET_MODEL_METHOD),
    # figures 15-17: the RobustBench model zoo, per (dataset, threat model) at its robust evaluation
    "zoo_classwise": FigureKind("study.figures.zoo:draw_zoo_classwise", "table", ("evaluations",)),
    "zoo_ranks": FigureKind("study.figures.zoo:draw_zoo_ranks", "table", ("evaluations",)),
    "zoo_gap": FigureKind("study.figures.zoo:draw_zoo_gap", "table", ("evaluations",)),
}
