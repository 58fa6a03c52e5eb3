"""Draw figure 12 (what `study features-figure` runs): the models trained on the constructed
feature datasets beside their source models, class by class, and examples of each dataset.

The catalog's row of figure 12 holds `make_features_figure` (study.figures.catalog), and the
`study` command builds its parser from the catalog: pandas, the prepared data (torch) and the
drawing are imported inside it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path


def make_features_figure(
    table: str | Path,
    dataset: str,
    model: str,
    sources: Mapping[str, str],
    data: str | Path,
    constructed: Sequence[str | Path],
    out_stem: str | Path,
    examples_stem: str | Path,
) -> list[Path]:
    """Figure 12 of `model` on `dataset` from the class-wise table, its source runs given as
    {role: run id}, and its examples from the original prepared dataset `data` and the
    `constructed` ones; returns the files written (under `out_stem` and `examples_stem`)."""
    import pandas as pd

    from study.data.prepared import load_prepared
    from study.figures.features import (
        example_sets,
        feature_rows,
        features_title,
        plot_feature_classwise,
        plot_feature_examples,
        rows_class_names,
    )
    from study.figures.style import save_figure

    rows = feature_rows(pd.read_csv(table), dataset, model, sources)
    variant = str(rows["data_variant"].iloc[0])
    title = features_title(dataset, model, variant)
    written = save_figure(plot_feature_classwise(rows, title), out_stem)

    examples = example_sets(load_prepared(data), [load_prepared(p) for p in constructed])
    written += save_figure(plot_feature_examples(examples, rows_class_names(rows), title.split(" | ")[0]),
                           examples_stem)
    return written
