"""Figures 9 and 10: confusion between classes and cosine similarity of the classes' mean logits,
one panel per evaluation, from the runs' per-sample records (study evaluate); the drawing is
study.figures.explain's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from study.labels import eval_name


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
    from study.config.spec import ConfigSpec
    from study.figures.style import reduced_recipe

    runs = [ConfigSpec.parse(m["run_config"], "a record's run_config").config for m in metas if "run_config" in m]
    trained = [r for r in runs if hasattr(r, "epochs")]
    if not trained:
        return None
    return reduced_recipe([r.epochs for r in trained], [r.train_per_class for r in trained])


def _class_matrices(records: Sequence[str | Path], matrix) -> tuple[dict, list[str], list[str] | None, str,
                                                                    str | None]:
    """Per evaluation, the mean over seeds of `matrix(frame, num_classes)` of each record; the
    class names, their superclasses (or None), the run's title and its reduced-recipe note."""
    import numpy as np

    from study.config.spec import ConfigSpec
    from study.evaluate.records import read_records
    from study.figures.style import run_title

    per_eval: dict[str, list[np.ndarray]] = {}
    sizes: dict[str, list[int]] = {}
    metas = []
    for path in records:
        frame, meta = read_records(path)
        metas.append(meta)
        if meta["class_names"] != metas[0]["class_names"]:
            raise ValueError(f"{path} has other classes than {records[0]}; draw one dataset per figure")
        per_eval.setdefault(meta["evaluation"]["name"], []).append(matrix(frame, len(meta["class_names"])))
        per_class = frame["label"].value_counts()
        sizes.setdefault(meta["evaluation"]["name"], []).append(int(per_class.min()) if len(per_class) else 0)
    if not metas:
        raise ValueError("no records to draw a class matrix of")
    meta0 = metas[0]
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


def draw_confusion(records: Sequence[str | Path], out_stem: str | Path, *, title: str | None = None,
                   **_) -> list[Path]:
    """Figure 9: confusion between classes, one panel per evaluation."""
    from study.figures.explain import plot_confusion
    from study.figures.style import save_figure
    from study.metrics.confusion import confusion_matrix

    panels, names, groups, heading, recipe = _class_matrices(records, confusion_matrix)
    return save_figure(plot_confusion(panels, names, groups, (title or heading) + " · confusion (rows: true class)",
                                      recipe=recipe), out_stem)


def draw_logit_similarity(records: Sequence[str | Path], out_stem: str | Path, *, title: str | None = None,
                          **_) -> list[Path]:
    """Figure 10: cosine similarity of the classes' mean logits, one panel per evaluation."""
    from study.figures.explain import plot_logit_similarity
    from study.figures.style import save_figure
    from study.metrics.confusion import logit_cosine_similarity

    panels, names, groups, heading, recipe = _class_matrices(records, logit_cosine_similarity)
    return save_figure(plot_logit_similarity(panels, names, groups,
                                             (title or heading) + " · cosine similarity of mean logits",
                                             recipe=recipe), out_stem)
