"""The values of params.yaml that are set for one run, as opposed to the study's defaults.

A preset is merged over params.yaml, so a value written into params.yaml (what `dvc exp run -S
train.epochs=3` does) would lose to the preset's `train.epochs` and DVC would record a value that
did not run. The study's defaults are its published settings (workflow/published-settings.yaml,
params.yaml as committed on main, annotated); every value where params.yaml differs from them is
set, and load_params merges it after the preset (`set_in_params`), whoever loads params.yaml:
Snakemake, `dvc repro` (python -m study.stage, which hands them on as `--config` as well), the
`study` command. So after `dvc exp apply`, or on an experiment's commit, plain Snakemake runs what
the experiment ran. Snakemake's own `--config` values are merged last, the same way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import yaml

from study.config.core import ConfigError
from study.config.yamlfile import read_yaml

#: DVC names the commit an experiment starts from (dvc.env.DVC_EXP_BASELINE_REV)
BASELINE_ENV = "DVC_EXP_BASELINE_REV"


def _same(a: object, b: object) -> bool:
    # 0.0005 and 5.0e-4 are one value; `true` and 1 are not (YAML keeps them apart, and so do the types)
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def changed_values(current: Mapping, committed: Mapping) -> dict:
    """`differences`, where a key deleted from `current` (at any depth) is refused: it cannot be an
    override, and a preset would put back a value that the run does not show."""
    for key, before in committed.items():
        if key not in current:
            raise ConfigError(f"params.yaml: key {key!r} of the committed params.yaml was removed; set a value "
                              "for it instead (a preset would otherwise put back a value that the run does not show)")
        if isinstance(before, Mapping) and isinstance(current[key], Mapping):
            changed_values(current[key], before)
    return differences(current, committed)


#: the study's defaults, beside the presets (workflow/): params.yaml as committed, annotated
PUBLISHED_SETTINGS = Path("workflow/published-settings.yaml")


def differences(current: Mapping, base: Mapping) -> dict:
    """The parts of `current` that differ from `base`: mappings key by key, anything else (a scalar,
    a list) whole; a key `base` lacks included, a key `current` lacks skipped."""
    out: dict = {}
    for key, value in current.items():
        before = base.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            if inner := differences(value, before):
                out[key] = inner
        elif key not in base or not _same(value, before):
            out[key] = value
    return out


def _published_differences(params: Mapping, params_path: Path) -> dict:
    """Where `params` differs from the published settings beside `params_path` (none where the
    project has no published settings: a configuration written by hand)."""
    published = Path(params_path).resolve().parent / PUBLISHED_SETTINGS
    return differences(params, read_yaml(published)) if published.is_file() else {}


def set_in_params(params: Mapping, params_path: Path) -> dict:
    """The values `params` (params.yaml as read from `params_path`) sets: where it differs from the
    published settings beside it, the preset's selection aside (the preset it names is loaded as such)."""
    values = _published_differences(params, params_path)
    values.pop("preset", None)
    return values


def run_overrides(params_path: Path) -> dict:
    """The values of params.yaml set for this run (see the module's docstring), the preset it
    names among them where that is not the published one."""
    return _published_differences(read_yaml(Path(params_path)), Path(params_path))


def config_arguments(overrides: Mapping) -> list[str]:
    """`KEY=VALUE` arguments of Snakemake's `--config`, one per top-level key: a scalar as
    written, anything else in YAML flow style (which Snakemake reads with YAML's base loader and
    load_params types again; YAML rather than JSON so that 5e-05 keeps its dot: 5.0e-05)."""
    args = []
    for key, value in overrides.items():
        args.append(f"{key}={value if isinstance(value, str) else _flow(value)}")
    return args


def _flow(value: object) -> str:
    return yaml.safe_dump(value, default_flow_style=True, width=math.inf).strip().removesuffix("...").strip()


def describe(overrides: Mapping, where: str = "") -> list[str]:
    """`a.b=value` for every leaf of the overrides (lists whole), for the one line a stage prints."""
    out = []
    for key, value in overrides.items():
        path = f"{where}.{key}" if where else str(key)
        if isinstance(value, Mapping) and value:
            out += describe(value, path)
        else:
            out.append(f"{path}={_flow(value)}")
    return out
