"""The values of params.yaml that are set for one run, as opposed to the study's defaults.

A preset is merged over params.yaml, so a value written into params.yaml (what `dvc exp run -S
train.epochs=3` does) would lose to the preset's `train.epochs` and DVC would record a value that
did not run. The study's defaults are params.yaml as committed (`git show REV:params.yaml`,
REV the experiment's baseline under `dvc exp run`, else HEAD); every value where the working
params.yaml differs from them was set for this run, and is handed to Snakemake as a `--config`
override, which load_params merges after the preset. Snakemake's own `--config` values take
the same road, so both front ends mean the same thing by a value given on the command line.
"""

from __future__ import annotations

import math
import os
import subprocess
from collections.abc import Mapping
from pathlib import Path

import yaml

from study.config.core import ConfigError
from study.config.yamlfile import load_yaml

#: DVC names the commit an experiment starts from (dvc.env.DVC_EXP_BASELINE_REV)
BASELINE_ENV = "DVC_EXP_BASELINE_REV"


def committed_params(params_path: Path, rev: str | None = None) -> dict:
    """params.yaml as committed at `rev` (the experiment's baseline, else HEAD); a ConfigError
    line when git cannot give it, since without it no value set for the run can be told apart."""
    params_path = Path(params_path).resolve()
    rev = rev or os.environ.get(BASELINE_ENV) or "HEAD"
    try:
        proc = subprocess.run(["git", "show", f"{rev}:./{params_path.name}"], cwd=params_path.parent,
                              capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise ConfigError("git is not installed: the study's defaults are params.yaml as committed, "
                          "and values set for a run (dvc exp run -S) are told apart from them by git") from None
    if proc.returncode != 0:
        reason = (proc.stderr.strip().splitlines() or ["git show failed"])[-1]
        raise ConfigError(f"{params_path} has no committed version at {rev} ({reason}): commit params.yaml "
                          "(the study's defaults) so that the values set for a run can be told from them")
    try:
        data = load_yaml(proc.stdout, f"{params_path} at {rev}")
    except yaml.YAMLError as err:
        raise ConfigError(f"{params_path} at {rev} is not valid YAML: {' '.join(str(err).split())}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{params_path} at {rev} must hold a mapping at the top level")
    return data


def _same(a: object, b: object) -> bool:
    # 0.0005 and 5.0e-4 are one value; `true` and 1 are not (YAML keeps them apart, and so do the types)
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def changed_values(current: Mapping, committed: Mapping) -> dict:
    """The parts of `current` that differ from `committed`: mappings key by key, anything else
    (a scalar, a list) whole. A key deleted from `current` cannot be an override and is refused."""
    out: dict = {}
    for key in committed:
        if key not in current:
            raise ConfigError(f"params.yaml: key {key!r} of the committed params.yaml was removed; set a value "
                              "for it instead (a preset would otherwise put back a value that the run does not show)")
    for key, value in current.items():
        before = committed.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            if inner := changed_values(value, before):
                out[key] = inner
        elif key not in committed or not _same(value, before):
            out[key] = value
    return out


def run_overrides(params_path: Path, rev: str | None = None) -> dict:
    """The values of the working params.yaml set for this run (see the module's docstring)."""
    from study.config.params import read_yaml

    return changed_values(read_yaml(Path(params_path)), committed_params(params_path, rev))


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
