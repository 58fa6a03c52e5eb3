"""Labels: what a reader sees. The display names of methods, evaluations, datasets and models
that every figure and every table meant for readers takes its labels from, so no configuration
key reaches a reader. What files and records are called is study.record_names'.

Evaluation labels are built from the evaluation's settings (type, norm, eps, steps) when the
caller has them (the records carry them; `evaluation_settings` reads them from the params), since
the same key can mean another budget on another dataset (MNIST's pgd10 is eps 0.3). Without
settings the label comes from the study's key convention (pgd20, pgd20_linf4, pgd_l2_05) and
names no budget that the key does not spell out. Unknown keys are title-cased and spaced.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction

from study.checkpoints import CHECKPOINT_LABELS
from study.config.evaluations import EVALUATION_KINDS
from study.config.types import Params
from study.data.registry import DATASETS
from study.models.registry import MODELS
from study.record_names import split_record_name

# Datasets that no row of study.data.registry holds (the rows' labels are theirs): other spellings
# and datasets that records and published tables name.
OTHER_DATASET_NAMES = {
    "tiny_imagenet": "Tiny ImageNet",
    "stl10": "STL-10",
    "fashion_mnist": "Fashion-MNIST",
    "cifar10_c": "CIFAR-10-C",
}
# Models that no row of study.models.registry builds: other spellings of its architectures (in
# records and published tables) and models trained elsewhere (the zoo's torchvision ones).
OTHER_MODEL_LABELS = {
    "wrn28_10": "WRN-28-10",
    "wide_resnet28_10": "WRN-28-10",
    "wrn34_10": "WRN-34-10",
    "wide_resnet34_10": "WRN-34-10",
    "resnet50_torchvision": "ResNet-50 (torchvision)",
    "Salman2020Do_R50": "ResNet-50 (Salman et al. 2020, robust)",
}
# Whole method names; composed methods (trades_cfa_fawa) are spelled from _METHOD_PARTS.
METHOD_NAMES = {
    "standard": "Standard",
    "pgd_at": "PGD-AT",
    "at": "PGD-AT",  # the mitigation group's PGD-AT: its own key keeps its runs apart, not its name
    "pgd_at_l2": "PGD-AT (L2)",
    "fgsm_at": "FGSM-AT",
    "fast_at": "Fast-AT",
    "trades": "TRADES",
    "trades_normalized": "TRADES (normalized as CFA)",  # (CE + beta KL) / (1 + beta), trades_cfa's baseline
    "mart": "MART",
    "fat": "FAT",
    "frl": "FRL",
    "cw_equal": "Cost-sensitive (equal)",
    "cw_critical": "Cost-sensitive (critical class)",
    "tat_weakest": "Targeted AT (weakest class)",
    "cosine_penalty": "Cosine penalty",
}
_METHOD_PARTS = {"at": "PGD-AT", "trades": "TRADES", "fat": "FAT", "cfa": "CFA", "fairtat": "FAIR-TAT",
                 "ema": "EMA", "fawa": "FAWA"}
# Suffixes that qualify a composed method rather than add a part to it.
_METHOD_QUALIFIERS = {"nowa": "no weight averaging"}
# Attacks that records' keys and published tables name but no evaluation kind runs (the kinds'
# labels are their rows', study.config.evaluations).
OTHER_ATTACK_NAMES = {"aa": "AutoAttack", "fgsm": "FGSM", "apgd": "APGD", "bim": "BIM", "cw": "CW", "fab": "FAB",
                      "fat": "FAT"}
NORM_NAMES = {"linf": "L∞", "l2": "L2", "l1": "L1"}
# Of those, the ones whose key names no norm run under L-inf, and those whose label gives the steps
# (an evaluation kind: whether its settings have a norm, and steps).
_OTHER_LINF_BY_DEFAULT = {"aa", "fgsm", "apgd", "bim", "fab"}
_OTHER_STEPPED = {"fgsm", "apgd", "bim"}
# Datasets built after Ilyas et al. 2019 (docs/study.md#figures, 12), named as in the paper.
CONSTRUCTED_NAMES = {"d_rand": "D_rand", "d_det": "D_det", "d_nr": "D_NR", "d_r": "D_R"}

_EVAL_KEY = re.compile(r"^(?P<attack>[a-z]+?)(?P<steps>\d+)?(?:_(?P<norm>linf|l2|l1)_?(?P<eps>\d+))?$")
_LOWER_WORDS = {"of", "and", "on", "at", "the", "with"}


def humanize(key: str) -> str:
    """Fallback display name of an unknown key: 'my_new_net' -> 'My New Net'. Never the key itself
    for a lower-case key, so a reader sees that it is a name and not a setting to look up."""
    words = [w for w in re.split(r"[_\s]+", str(key)) if w]
    if not words:
        return str(key)
    out = [w if not w.islower() else (w if i and w in _LOWER_WORDS else w[:1].upper() + w[1:])
           for i, w in enumerate(words)]
    return " ".join(out)


_ZOO_ID = re.compile(r"^(?P<author>[A-Z][A-Za-z]+?)(?P<year>(?:19|20)\d\d)(?P<word>[^_]*)(?:_(?P<rest>.+))?$")
ZOO_NAMES = {"Standard": "Standard training (RobustBench)"}


def zoo_model_name(key: str) -> str:
    """A RobustBench model ID as a reader cites it: 'Carmon2019Unlabeled' -> 'Carmon et al. 2019
    (Unlabeled)', 'Gowal2020Uncovering_70_16_extra' -> 'Gowal et al. 2020 (Uncovering, 70-16, extra)'."""
    key = str(key)
    match = _ZOO_ID.match(key)
    if key in ZOO_NAMES or not match:
        return ZOO_NAMES.get(key, key)
    rest = match["rest"] or ""
    rest = re.sub(r"(?<=\d)_(?=\d)", "-", rest).replace("_", " ")
    details = ", ".join(x for x in (match["word"], rest) if x)
    return f"{match['author']} et al. {match['year']}" + (f" ({details})" if details else "")


def dataset_name(key: str) -> str:
    """'cifar10' -> 'CIFAR-10'; constructed sets ('cifar10_d_r') -> 'CIFAR-10 (D_R)'."""
    key = str(key)
    if is_dataset(key):
        return _dataset_label(key)
    for kind, shown in CONSTRUCTED_NAMES.items():
        base = key.removesuffix(f"_{kind}")
        if base != key and is_dataset(base):
            return f"{_dataset_label(base)} ({shown})"
    return humanize(key)


def is_dataset(key: str) -> bool:
    """Whether `key` names a dataset that has a label (a row of the registry, or another)."""
    return key in DATASETS or key in OTHER_DATASET_NAMES


def _dataset_label(key: str) -> str:
    if key in DATASETS:
        return DATASETS[key].label or humanize(key)
    return OTHER_DATASET_NAMES[key]


def model_name(key: str) -> str:
    """'preact_resnet18' -> 'PreAct-ResNet-18'."""
    key = str(key)
    return MODELS[key].label if key in MODELS else OTHER_MODEL_LABELS.get(key) or humanize(key)


def is_model(key: str) -> bool:
    """Whether `key` names a model that has a label (an architecture of the registry, or another)."""
    return key in MODELS or key in OTHER_MODEL_LABELS


def method_name(key: str) -> str:
    """'pgd_at' -> 'PGD-AT', 'trades_cfa_fawa' -> 'TRADES + CFA + FAWA', 'frl_reweight' -> 'FRL (reweight)',
    'trades_cfa_nowa' -> 'TRADES + CFA (no weight averaging)'."""
    key = str(key)
    if key in METHOD_NAMES:
        return METHOD_NAMES[key]
    if key.startswith("frl_"):
        return "FRL (" + " + ".join(key.split("_")[1:]) + ")"
    parts = key.replace("pgd_at", "at").split("_")
    qualifiers: list[str] = []
    while parts and parts[-1] in _METHOD_QUALIFIERS:
        qualifiers.insert(0, _METHOD_QUALIFIERS[parts.pop()])
    if parts and all(p in _METHOD_PARTS for p in parts):
        name = " + ".join(_METHOD_PARTS[p] for p in parts)
        return f"{name} ({', '.join(qualifiers)})" if qualifiers else name
    return humanize(key)


def _fraction(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, str) and "/" in value:
        num, den = value.split("/", 1)
        return float(num) / float(den)
    if not isinstance(value, int | float | str):
        raise TypeError(f"a radius or step size is a number or a fraction such as '8/255', got {value!r}")
    return float(value)


def format_eps(eps: object, norm: str | None) -> str:
    """An attack budget as papers write it: L-inf budgets on 0-1 images as k/255, others as numbers."""
    value = _fraction(eps)
    if value is None:
        return ""
    if norm == "linf":
        k = Fraction(value * 255).limit_denominator(4)
        if abs(float(k) - value * 255) < 1e-6 and 0 < k <= 64:
            return f"{k}/255"
    return f"{value:g}"


def attack_name(kind: str) -> str | None:
    """'pgd' -> 'PGD': the label of an evaluation kind's row, or of another attack a key names."""
    return EVALUATION_KINDS[kind].label if kind in EVALUATION_KINDS else OTHER_ATTACK_NAMES.get(kind)


def _has_setting(kind: str, setting: str, others: set[str]) -> bool:
    """Whether attacks of `kind` have `setting` (its row's settings class; `others` for attacks no row runs)."""
    return setting in EVALUATION_KINDS[kind].settings.model_fields if kind in EVALUATION_KINDS else kind in others


def _key_settings(key: str) -> dict:
    """Settings spelled out by a key of the study's convention: pgd20, pgd20_linf4, pgd_l2_05."""
    match = _EVAL_KEY.match(key)
    if not match or attack_name(match["attack"]) is None:
        return {}
    out: dict = {"type": match["attack"]}
    if match["steps"]:
        out["steps"] = int(match["steps"])
    if match["norm"]:
        out["norm"] = match["norm"]
        digits = match["eps"]
        # the convention: L-inf budgets in 1/255 (linf4), others as decimals without the point (l2_05)
        out["eps"] = int(digits) / 255 if match["norm"] == "linf" else float(
            f"0.{digits[1:]}" if digits.startswith("0") else digits)
    elif _has_setting(match["attack"], "norm", _OTHER_LINF_BY_DEFAULT):
        out["norm"] = "linf"
    return out


def corruption_name(key: str) -> str:
    """'gaussian_noise' -> 'Gaussian noise', 'jpeg_compression' -> 'JPEG compression' (CIFAR-10-C)."""
    words = str(key).split("_")
    words = ["JPEG" if w == "jpeg" else w for w in words]
    text = " ".join(words)
    return text[:1].upper() + text[1:]


def eval_settings_of(key: str, settings: Mapping | None = None) -> dict:
    """The settings of an evaluation: `settings` when given, else what its key spells out."""
    base, _ = split_record_name(key)
    if settings:
        return {k: v for k, v in settings.items() if v is not None}
    return _key_settings(base) if base != "clean" else {"type": "clean"}


def eval_norm(key: str, settings: Mapping | None = None) -> str | None:
    """Threat model of an evaluation: 'linf', 'l2', ... or None for clean (and corruptions)."""
    # `found`: an evaluation's settings, or those a record's key spells out (fgsm, apgd, bim:
    # types the configuration's union lacks), so it stays a mapping
    found = eval_settings_of(key, settings)
    if found.get("type", "clean") == "clean":  # see `found`
        return None
    norm = found.get("norm")  # see `found`
    if norm is None and _has_setting(str(found.get("type")), "norm", _OTHER_LINF_BY_DEFAULT):  # see `found`
        return "linf"
    return norm


def eval_name(key: str, settings: Mapping | None = None) -> str:
    """'pgd20' with its settings -> 'PGD-20, L∞ 8/255'; 'pgd_l2_05' -> 'PGD, L2 0.5'; 'clean' -> 'Clean'.
    The best checkpoint's records ('pgd20@best') add '(best checkpoint)'."""
    base, checkpoint = split_record_name(key)
    found = eval_settings_of(key, settings)  # a mapping, as in eval_norm
    kind = str(found.get("type", ""))  # see `found`
    if kind == "clean":
        name = "Clean"
    elif (named := attack_name(kind)) is not None:
        name = named
        if _has_setting(kind, "steps", _OTHER_STEPPED) and found.get("steps"):  # see `found`
            name += f"-{found['steps']}"
        norm = found.get("norm")  # see `found`
        budget = format_eps(found.get("eps"), norm)  # see `found`
        if norm in NORM_NAMES and budget:
            name += f", {NORM_NAMES[norm]} {budget}"
        elif norm in NORM_NAMES:
            name += f", {NORM_NAMES[norm]}"
    else:
        name = humanize(base)
    return name + (f" ({CHECKPOINT_LABELS[checkpoint]})" if checkpoint != "last" else "")


def eval_label(key: str, settings: Mapping | None = None) -> str:
    """Legend label: 'clean accuracy' for clean, 'robustness (PGD-20, L∞ 8/255)' for an attack."""
    base, checkpoint = split_record_name(key)
    suffix = f", {CHECKPOINT_LABELS[checkpoint]}" if checkpoint != "last" else ""
    if eval_settings_of(base, settings).get("type") == "clean":  # a mapping, as in eval_norm
        return "clean accuracy" + suffix
    return f"robustness ({eval_name(base, settings)}){suffix}"


def norm_title(norm: str | None) -> str:
    """Panel heading of a threat model: 'L∞ attacks', 'L2 attacks'."""
    return f"{NORM_NAMES.get(norm, humanize(norm))} attacks" if norm else "clean"


def evaluation_settings(params: Params, dataset: str | None = None) -> dict[str, dict]:
    """Every evaluation's settings from the params (per_dataset applied), for `eval_settings=`."""
    from study.config.methods import resolve_evaluation

    names = set(params.evaluations)
    if dataset is not None and dataset in params.per_dataset:
        names |= set(params.per_dataset[dataset].evaluations)
    return {name: resolve_evaluation(params, name, dataset) for name in sorted(names)}
