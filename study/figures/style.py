"""Fonts, sizes, colours, display names and file output shared by every figure of the study."""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import matplotlib as mpl
import numpy as np
from matplotlib.figure import Figure

# Applied through rc_context only while a figure is being built, so importing this
# package never changes the caller's matplotlib settings.
RC = {
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

# Clean accuracy always gets the same colour; attacks take the following ones in order.
CLEAN_COLOR = "#4C72B0"
ATTACK_COLORS = ("#DD8452", "#C44E52", "#8172B3", "#937860", "#55A868", "#DA8BC3")
SEED_DOT_COLOR = "#222222"

_MODELS = {
    "preact_resnet18": "PreAct-ResNet18",
    "resnet18": "ResNet18",
    "resnet50": "ResNet50",
    "wide_resnet28_10": "WRN-28-10",
    "wide_resnet34_10": "WRN-34-10",
    "wrn28_10": "WRN-28-10",
    "wrn34_10": "WRN-34-10",
    "vgg16": "VGG16",
    "small_cnn": "Small CNN",
}
_METHODS = {
    "standard": "Standard",
    "pgd_at": "PGD-AT",
    "fgsm_at": "FGSM-AT",
    "fast_at": "Fast-AT",
    "trades": "TRADES",
    "mart": "MART",
    "frl": "FRL",
    "frl_reweight": "FRL (reweight)",
    "frl_remargin": "FRL (remargin)",
    "frl_reweight_remargin": "FRL (reweight + remargin)",
}
_DATASETS = {
    "cifar10": "CIFAR-10",
    "cifar100": "CIFAR-100",
    "svhn": "SVHN",
    "stl10": "STL-10",
    "mnist": "MNIST",
    "fashion_mnist": "Fashion-MNIST",
    "tiny_imagenet": "Tiny-ImageNet",
}
_ATTACKS = {"pgd": "PGD", "apgd": "APGD", "cw": "CW", "fgsm": "FGSM", "bim": "BIM"}
_EVALS = {"clean": "Clean", "aa": "AutoAttack", "autoattack": "AutoAttack", "fgsm": "FGSM"}
_ATTACK_WITH_STEPS = re.compile(r"^([a-z]+)[-_]?(\d+)$")


@contextmanager
def figure_style() -> Iterator[None]:
    """Temporarily apply the study's matplotlib settings."""
    with mpl.rc_context(RC):
        yield


def pretty_eval(name: str) -> str:
    """Display name of an evaluation: "pgd20" -> "PGD-20", "clean" -> "Clean"."""
    if name in _EVALS:
        return _EVALS[name]
    match = _ATTACK_WITH_STEPS.match(name)
    if match and match.group(1) in _ATTACKS:
        return f"{_ATTACKS[match.group(1)]}-{match.group(2)}"
    return name


def eval_label(name: str) -> str:
    """Legend label: "clean accuracy" for clean, "robustness (PGD-20)" for an attack."""
    if name == "clean":
        return "clean accuracy"
    return f"robustness ({pretty_eval(name)})"


def pretty_model(name: str) -> str:
    """Display name of a model: "preact_resnet18" -> "PreAct-ResNet18"."""
    return _MODELS.get(name, name)


def pretty_method(name: str) -> str:
    """Display name of a training method: "pgd_at" -> "PGD-AT"."""
    return _METHODS.get(name, name)


def pretty_dataset(name: str) -> str:
    """Display name of a dataset: "cifar10" -> "CIFAR-10"."""
    return _DATASETS.get(name, name)


def run_title(
    dataset: str | None = None, model: str | None = None, method: str | None = None
) -> str:
    """Figure title from run identifiers, e.g. "CIFAR-10 | PreAct-ResNet18 | PGD-AT"."""
    parts = [
        pretty(value)
        for pretty, value in ((pretty_dataset, dataset), (pretty_model, model),
                              (pretty_method, method))
        if value is not None
    ]
    return " | ".join(parts)


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


FORMATS = ("png", "pdf")


def save_figure(fig: Figure, path_stem: str | os.PathLike) -> list[Path]:
    """Write `<stem>.png` (DPI dpi) and `<stem>.pdf`, creating folders; close the figure.

    The suffix is appended rather than substituted so stems containing dots
    ("fig1.cifar10") keep their full name. Each file is written beside its
    destination and renamed into place, so an interrupted job never leaves a
    truncated figure that looks finished.
    """
    stem = Path(path_stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    try:
        for fmt in FORMATS:
            path = stem.parent / f"{stem.name}.{fmt}"
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            os.close(fd)
            try:
                fig.savefig(tmp, format=fmt, dpi=DPI)
                os.replace(tmp, path)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            written.append(path)
    finally:
        # Figures built here are not registered with pyplot; one the caller made with
        # pyplot is, and would otherwise stay alive in pyplot's figure manager.
        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close(fig)
    return written
