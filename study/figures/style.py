"""Fonts, sizes, colours, display names, caveats and file output shared by every figure of the study.

Display names live in study.labels (below the figures and the tables, which both use them)."""

from __future__ import annotations

import os
import re
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import matplotlib as mpl
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.typing import RcKeyType

from study import labels
from study.io import atomic_path
from study.labels import dataset_name, eval_name, eval_norm, method_name, model_name
from study.published import FEWEST_PUBLISHED_EPOCHS, PUBLISHED_EPOCHS
from study.record_names import split_record_name

# Applied through rc_context only while a figure is being built, so importing this
# package never changes the caller's matplotlib settings.
RC: dict[RcKeyType, Any] = {
    "font.size": 10,
    "axes.titlesize": 11,
    "axes.labelsize": 10,
    "xtick.labelsize": 9,
    "ytick.labelsize": 9,
    "legend.fontsize": 9,
    "figure.titlesize": 12,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "axes.grid.axis": "y",
    "grid.alpha": 0.3,
    "pdf.fonttype": 42,  # embed TrueType so PDF text stays editable and searchable
}
DPI = 150
# No saved figure is wider or taller than this many pixels (a page or a slide at DPI): facets wrap
# into rows instead of running off into a strip.
MAX_PIXELS = 2400
MAX_INCHES = MAX_PIXELS / DPI
# A configuration key as it appears in params.yaml (pgd_l2_05, pgd_at_cfa): lower case with an underscore.
_KEYLIKE = re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b")

# Clean accuracy always gets the same colour; attacks take the following ones in order.
CLEAN_COLOR = "#4C72B0"
ATTACK_COLORS = ("#DD8452", "#C44E52", "#8172B3", "#937860", "#55A868", "#DA8BC3")
SEED_DOT_COLOR = "#222222"

@contextmanager
def figure_style() -> Iterator[None]:
    """Temporarily apply the study's matplotlib settings."""
    with mpl.rc_context(RC):
        yield


def run_title(
    dataset: str | None = None, model: str | None = None, method: str | None = None
) -> str:
    """Figure title from run identifiers, e.g. "CIFAR-10 | PreAct-ResNet-18 | PGD-AT"."""
    parts = [
        pretty(value)
        for pretty, value in ((dataset_name, dataset), (model_name, model), (method_name, method))
        if value is not None
    ]
    return " | ".join(parts)


def display_title(title: str) -> str:
    """A caller's title with any bare configuration key replaced by its display name: titles are
    built by callers this module does not control, and a key must never reach a reader."""
    return _KEYLIKE.sub(lambda m: _display_key(m.group(0)), title)


def _display_key(key: str) -> str:
    if key in labels.METHOD_NAMES:
        return method_name(key)
    if labels.is_model(key):
        return model_name(key)
    if labels.is_dataset(key):
        return dataset_name(key)
    if labels.eval_settings_of(key):
        return eval_name(key)
    return method_name(key)  # composed methods (trades_cfa_fawa), else the title-cased fallback


def counted_title(title: str | None, count: int, noun: str, base: str = "") -> str:
    """`title` with the number of `noun`s drawn. A count the caller put in the title (what it asked
    for) is replaced, since a figure's title must count what the figure shows."""
    heading = re.sub(rf"\s*[·|,]?\s*\b\d+\s+{noun}s?\b", "", display_title(title or base)).strip()
    counted = f"{count} {noun}{'' if count == 1 else 's'}"
    return f"{heading}  ·  {counted}" if heading else counted


def panel_title(name: str) -> str:
    """A panel name from a caller: an evaluation key ('clean', 'pgd20') becomes its display name."""
    key = name.split(" · ")[0]
    if labels.eval_settings_of(key):  # empty unless `key` is spelled like an evaluation key
        return eval_name(key) + name[len(key):]
    return name


def eval_colors(evals: Sequence[str]) -> dict[str, str]:
    """Colour per evaluation, stable for clean and in order for attacks."""
    colors: dict[str, str] = {}
    attacks = iter(ATTACK_COLORS * (1 + len(evals) // len(ATTACK_COLORS)))
    for name in evals:
        colors[name] = CLEAN_COLOR if name == "clean" else next(attacks)
    return colors


def class_palette(num_classes: int) -> list[tuple[float, float, float, float]]:
    """Qualitative colours, one per class.

    tab10 for up to 10 classes (distinct and colour-blind tolerable), tab20 up to 20;
    beyond that no qualitative palette can keep classes apart, so evenly spaced hues
    are used and the figures drop per-class legends.
    """
    if num_classes <= 20:
        cmap = mpl.colormaps["tab10" if num_classes <= 10 else "tab20"]
        return [cmap(i) for i in range(num_classes)]
    cmap = mpl.colormaps["hsv"]
    return [cmap(x) for x in np.linspace(0.0, 1.0, num_classes, endpoint=False)]


def figure_size(width: float, height: float) -> tuple[float, float]:
    """(width, height) in inches, each at most MAX_INCHES, so the PNG stays within MAX_PIXELS."""
    return min(float(width), MAX_INCHES), min(float(height), MAX_INCHES)


def grid_shape(panels: int, max_cols: int = 3) -> tuple[int, int]:
    """Rows and columns of a grid of `panels` facets, at most `max_cols` per row."""
    cols = max(1, min(panels, max_cols))
    return -(-panels // cols), cols


def percent_axis(ax: Axes, label: str, axis: str = "y", lo: float = 0.0, hi: float = 100.0) -> None:
    """Label an accuracy or rate axis in percent and fix its limits to [lo, hi] within 0-100."""
    (ax.set_ylim if axis == "y" else ax.set_xlim)(max(0.0, lo), min(100.0, hi))
    (ax.set_ylabel if axis == "y" else ax.set_xlabel)(label)


def hide_unused(axes: np.ndarray, used: int) -> None:
    """Switch off the grid cells after the first `used` (a wrapped grid rarely fills its last row)."""
    for ax in np.asarray(axes).ravel()[used:]:
        ax.set_axis_off()


# ---------------------------------------------------------------- threat models

_NORM_ORDER = {"linf": 0, "l2": 1, "l1": 2}


def norm_groups(evals: Sequence[str], settings: Mapping[str, Mapping] | None = None
                ) -> list[tuple[str | None, list[str]]]:
    """Evaluations split by threat model, clean in every group: L2 and L-inf results never share an
    axis, since their budgets are not comparable. [(None, ['clean'])] when nothing is attacked."""
    settings = settings or {}
    clean = [e for e in evals if eval_norm(e, settings.get(e)) is None and split_record_name(e)[0] == "clean"]
    groups: dict[str, list[str]] = {}
    for e in evals:
        if e in clean:
            continue
        norm = eval_norm(e, settings.get(e)) or "other"
        groups.setdefault(norm, []).append(e)
    if not groups:
        return [(None, list(clean))]
    order = sorted(groups, key=lambda n: (_NORM_ORDER.get(n, 9), n))
    return [(n, [*clean, *groups[n]]) for n in order]


# ---------------------------------------------------------------- caveats

# `caveat=AUTO` (the default of every plotting function) asks the figure to decide from its data;
# None draws no note; any other text is drawn as given.
AUTO = "auto"
# Fewer epochs than this on a subset cannot separate the classes of a real dataset (the published
# runs train 120-200: docs/study.md#published-settings) ...
MIN_EPOCHS = 5
# ... unless the run saw at least this many training images: the demo's CPU recipe trains two
# epochs on all 50,000 CIFAR-10 images with one cyclic learning-rate cycle, and its classes separate.
MIN_IMAGES_SEEN = 50_000
# A mean class accuracy at most this multiple of chance (1 / classes) is a model that has not learned.
CHANCE_FACTOR = 1.5
CAVEAT_COLOR = "#B22222"


def run_caveat(*, epochs: float | None = None, mean_acc: float | None = None, num_classes: int | None = None,
               worst: Sequence[float] | None = None, min_epochs: int = MIN_EPOCHS,
               images_seen: float | None = None) -> str | None:
    """The note a panel needs when its run is too short to mean anything, else None: fewer than
    `min_epochs` epochs (unless the run saw at least MIN_IMAGES_SEEN training images, where
    `images_seen` is known), a clean mean class accuracy at chance level, or a worst class at 0%
    in every entry of `worst` (fractions)."""
    reasons = []
    enough_images = images_seen is not None and images_seen >= MIN_IMAGES_SEEN
    if epochs is not None and np.isfinite(epochs) and epochs < min_epochs and not enough_images:
        reasons.append(f"{int(epochs)} epoch{'' if int(epochs) == 1 else 's'}")
    if mean_acc is not None and num_classes and np.isfinite(mean_acc) and mean_acc <= CHANCE_FACTOR / num_classes:
        reasons.append(f"clean accuracy at chance level, {100 * mean_acc:.0f}%")
    worst_values = np.asarray(worst if worst is not None else [], dtype=float)
    if worst_values.size and np.all(worst_values == 0):
        reasons.append("worst class at 0% everywhere")
    return f"run too short to compare ({', '.join(reasons)})" if reasons else None


def images_seen(table: pd.DataFrame) -> float | None:
    """Training images the table's shortest run saw: from an epochs table's `train_n` (per epoch and class),
    else `epochs` x `train_per_class` x classes (an empty train_per_class: the whole training set,
    counted as enough); None where the table cannot tell."""
    if {"epoch", "train_n"} <= set(table.columns):
        # one row per epoch and class, train_n the class's images: the first run's, summed
        key = next((k for k in ("run_id", "seed") if k in table.columns), None)
        rows = table[table[key] == table[key].iloc[0]] if key else table
        return float(pd.to_numeric(rows["train_n"], errors="coerce").sum())
    if not {"epochs", "train_per_class", "class"} <= set(table.columns):
        return None
    per_class = pd.to_numeric(table["train_per_class"], errors="coerce")
    if per_class.isna().all():
        return float("inf")
    epochs = pd.to_numeric(table["epochs"], errors="coerce")
    return float((epochs * per_class).min() * table["class"].nunique())


def table_caveat(table: pd.DataFrame, value: str = "acc") -> str | None:
    """run_caveat from a class-wise table: its `epochs` column (fewest epochs of its runs), the
    images its runs saw (images_seen) and the mean over classes of the clean rows of `value`
    (fractions)."""
    epochs = pd.to_numeric(table["epochs"], errors="coerce").min() if "epochs" in table.columns else None
    mean_acc = num_classes = None
    if "eval" in table.columns and value in table.columns:
        clean = table[table["eval"].map(lambda e: split_record_name(e)[0] == "clean")]
        if not clean.empty:
            mean_acc = float(clean.groupby("class")[value].mean().mean())
            num_classes = int(table["class"].nunique()) if "class" in table.columns else None
    return run_caveat(epochs=epochs, mean_acc=mean_acc, num_classes=num_classes, images_seen=images_seen(table))


def _span(values: Sequence[float], unit: str) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:,.0f} {unit}" if lo == hi else f"{lo:,.0f}-{hi:,.0f} {unit}"


def reduced_recipe(epochs: Sequence[float], train_per_class: Sequence[float | None]) -> str | None:
    """The subtitle of a figure whose runs (their `epochs` and `train_per_class`, one value per run;
    None or NaN: the whole training set) were trained at a smaller scale than the published recipe
    (fewer epochs than FEWEST_PUBLISHED_EPOCHS, or a subset of the training images), else None.
    Derived from the runs' records, whatever preset made them."""
    ran = [float(e) for e in epochs if e is not None and np.isfinite(float(e))]
    subset = [float(n) for n in train_per_class if n is not None and np.isfinite(float(n))]
    reasons = []
    if ran and min(ran) < FEWEST_PUBLISHED_EPOCHS:
        reasons.append(f"{_span(ran, 'epoch' if max(ran) == 1 else 'epochs')} (published recipes: "
                       f"{FEWEST_PUBLISHED_EPOCHS}-{PUBLISHED_EPOCHS})")
    if subset:
        reasons.append(f"{_span(subset, 'training images per class')} (published: all)")
    if not reasons:
        return None
    return f"reduced recipe: {', '.join(reasons)}; shows direction, not size"


def table_recipe(table: pd.DataFrame) -> str | None:
    """reduced_recipe from a table's `epochs` and `train_per_class` columns (one row per run is read:
    the first of each `run_id` where the table has one); None where it has neither column."""
    if "epochs" not in table.columns and "train_per_class" not in table.columns:
        return None
    runs = table.drop_duplicates("run_id") if "run_id" in table.columns else table
    epochs = pd.to_numeric(runs["epochs"], errors="coerce") if "epochs" in runs.columns else pd.Series(dtype=float)
    per_class = (pd.to_numeric(runs["train_per_class"], errors="coerce") if "train_per_class" in runs.columns
                 else pd.Series(dtype=float))
    return reduced_recipe(epochs.tolist(), per_class.tolist())


def with_recipe(title: str, recipe: str | None, width_in: float) -> str:
    """A figure's title with the reduced-recipe subtitle (reduced_recipe) on the lines under it,
    wrapped to the figure's width (`width_in` inches: about 10 characters of title text an inch)."""
    if not recipe:
        return title
    # never at a hyphen: a span ("2-4 epochs", "120-200") split over two lines reads as two numbers
    return f"{title}\n" + textwrap.fill(recipe, max(40, int(10 * width_in)), break_on_hyphens=False)


def resolve_caveat(caveat: str | None, decide: Callable[[], str | None]) -> str | None:
    """The caller's caveat, or `decide()` when the caller left it to the figure (AUTO)."""
    return decide() if caveat == AUTO else caveat


def draw_caveat(ax: Axes, text: str | None) -> None:
    """The note in the panel's title area, outside the data: a line under the panel's title (centre,
    else left), or in red in the right title slot when the panel has no title. Call it after the
    panel's titles are set."""
    if not text:
        return
    note = "⚠ " + text
    # matplotlib keeps the left title's Text only privately (its stubs declare no _left_title)
    for title in (ax.title, ax._left_title):  # type: ignore[attr-defined]
        if title.get_text():
            title.set_text(f"{title.get_text()}\n{note}")  # keeps the title's own size and colour
            return
    ax.set_title(note, loc="right", color=CAVEAT_COLOR, fontsize=8)


FORMATS = ("png", "pdf")


def save_figure(fig: Figure, path_stem: str | os.PathLike) -> list[Path]:
    """Write `<stem>.png` (DPI dpi) and `<stem>.pdf`, creating folders; close the figure.

    The suffix is appended rather than substituted so stems containing dots
    ("fig1.cifar10") keep their full name. Each file is written beside its
    destination and renamed into place, so an interrupted job never leaves a
    truncated figure that looks finished.
    """
    stem = Path(path_stem)
    # The last guard of the pixel budget: a figure that grew past it (many facets, long labels)
    # is scaled down as a whole rather than saved as an unreadable strip.
    width, height = fig.get_size_inches()
    if max(width, height) > MAX_INCHES:
        scale = MAX_INCHES / max(width, height)
        fig.set_size_inches(width * scale, height * scale)
    written: list[Path] = []
    try:
        for fmt in FORMATS:
            path = stem.parent / f"{stem.name}.{fmt}"
            with atomic_path(path) as tmp:  # a failed save: one line naming the file and the cause
                fig.savefig(tmp, format=fmt, dpi=DPI)
            written.append(path)
    finally:
        # Figures built here are not registered with pyplot; one the caller made with
        # pyplot is, and would otherwise stay alive in pyplot's figure manager.
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close(fig)
    return written
