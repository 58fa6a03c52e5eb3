"""The primitives every part of the configuration uses: the error type, fractions such as
'8/255', merging of mappings, and the settings of one dataset (`per_dataset`)."""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from pathlib import Path

_FRACTION = re.compile(r"^\s*(-?\d+(?:\.\d*)?)\s*/\s*(\d+(?:\.\d*)?)\s*$")

# Sections of params that `per_dataset.<name>` may override for runs on that dataset
# (MNIST's PGD-AT budget eps 0.3, 40 steps of 0.01, differs from CIFAR's 8/255).
PER_DATASET_SECTIONS = ("methods", "evaluations", "evaluate", "train")


class ConfigError(ValueError):
    """A configuration value is missing, unknown or malformed."""


def parse_fraction(value: float | int | str) -> float:
    """Accept 0.031, 8 or the string '8/255' (how attack budgets are written in papers)."""
    if isinstance(value, bool):
        raise ConfigError(f"expected a number or 'a/b', got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        m = _FRACTION.match(value)
        if m:
            if float(m.group(2)) == 0:
                raise ConfigError(f"{value!r} divides by zero; valid: a number >= 0 or a fraction with a "
                                  "non-zero denominator, like '8/255'")
            return float(m.group(1)) / float(m.group(2))
        try:
            return float(value)
        except ValueError:
            pass
    raise ConfigError(f"expected a number or a fraction like '8/255', got {value!r}")


def deep_merge(base: Mapping, over: Mapping) -> dict:
    """Recursively merge `over` onto `base`; lists and scalars in `over` replace."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def set_dotted(tree: Mapping, path: str, value: object) -> dict:
    """`tree` with `value` merged at the dotted `path` (mappings merge, other values replace)."""
    *parents, last = path.split(".")
    patch: dict = {last: value}
    for key in reversed(parents):
        patch = {key: patch}
    return deep_merge(tree, patch)


def merge_dataset_sections(params: Mapping, dataset: str) -> dict:
    """params as loaded with `per_dataset[dataset]` merged over its sections; unchanged for other
    datasets. Params.for_dataset parses the result (the per-dataset view of the typed params).

    Precedence, lowest first: params.yaml, preset, per_dataset entry (params.yaml's, then the
    preset's, merged key by key), an experiment group's own `train` and `grid`.
    """
    over = (params.get("per_dataset") or {}).get(dataset)  # loading: the entry is merged as written, then typed
    if not over:
        return dict(params)
    out = dict(params)
    for section in PER_DATASET_SECTIONS:
        if section in over:
            out[section] = deep_merge(params[section], over[section])
    return out


def configured_mirror(mirror: str | None) -> str | None:
    """The local mirror folder: $STUDY_DATA_MIRROR when set (a user's explicit choice), else
    `mirror` (params' data.mirror), else None."""
    from study.data.download import MIRROR_ENV

    return os.environ.get(MIRROR_ENV) or mirror or None


def resolve_auto_variants(params: Mapping) -> dict:
    """params with every `data.variants` entry of "auto" replaced by the variant that the
    raw-data folder and the mirror hold (study.data.registry.resolve_variant), so that run
    ids, records and titles name the data actually used. Unknown datasets are left for the
    reference check to report."""
    from study.data.registry import AUTO_VARIANT, DATASETS, resolve_variant

    # raw: `auto` is resolved in the params as loaded, before they are typed
    data = params.get("data") or {}  # raw, see above
    variants = data.get("variants") or {}  # raw, see above
    if AUTO_VARIANT not in variants.values():
        return dict(params)
    raw_dir = Path(data["root"]) / "raw"
    mirror = configured_mirror(data.get("mirror"))  # raw, see above
    resolved = {
        dataset: resolve_variant(dataset, variant, raw_dir, Path(mirror).expanduser() if mirror else None)
        if dataset in DATASETS else variant
        for dataset, variant in variants.items()
    }
    return {**params, "data": {**data, "variants": resolved}}
