"""YAML as the study reads it: safe, and bounded. An alias makes a value appear where it is
named without being copied, so a kilobyte of nested aliases (a "billion laughs") loads at once
into a tiny graph that every walk over it (merging a preset, typing it, expanding a grid, the
schema check) then expands: minutes of CPU before any error. Every document the study loads is
therefore measured as it would be expanded, counting each shared value once per place it
appears (memoized, so the count itself is linear in the graph), and refused above MAX_VALUES."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from study.config.core import ConfigError

# params.yaml with the largest preset is a few thousand values; a generous bound far from that
MAX_VALUES = 200_000
# libyaml's parser where PyYAML has it: the pure-Python parser takes a second per read of the schema
LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _TooLarge(Exception):
    pass


def _expanded(value: Any, memo: dict[int, int], active: set[int]) -> int:
    """How many values `value` stands for with every alias written out (> MAX_VALUES: _TooLarge)."""
    if isinstance(value, dict):
        children = [*value.keys(), *value.values()]
    elif isinstance(value, list):
        children = value
    else:
        return 1
    key = id(value)
    if key in memo:
        return memo[key]
    if key in active:
        raise _TooLarge("an alias refers to a value that contains it (a cycle)")
    active.add(key)
    total = 1
    for child in children:
        total += _expanded(child, memo, active)
        if total > MAX_VALUES:
            raise _TooLarge(f"its aliases expand it to more than {MAX_VALUES:,} values")
    active.discard(key)
    memo[key] = total
    return total


def check_expansion(data: Any, source: str) -> Any:
    """`data` if its aliases expand to at most MAX_VALUES values; a one-line ConfigError naming `source` otherwise."""
    try:
        _expanded(data, {}, set())
    except _TooLarge as err:
        raise ConfigError(f"{source}: {err} (an alias bomb?); write the values out, or use fewer nested "
                          "aliases") from None
    except RecursionError:
        raise ConfigError(f"{source}: nested too deeply to read") from None
    return data


def load_yaml(text: str | Any, source: str) -> Any:
    """The YAML document in `text` (a string or an open file), checked by `check_expansion`;
    yaml.YAMLError passes through for the caller to name the file."""
    return check_expansion(yaml.load(text, Loader=LOADER), source)


def read_yaml(path: Path) -> dict:
    """A YAML file holding a mapping (params.yaml, a preset); a ConfigError line otherwise."""
    try:
        with open(path) as fh:
            data = load_yaml(fh, str(path))
    except FileNotFoundError as err:
        raise ConfigError(f"config file not found: {path}") from err
    except yaml.YAMLError as err:
        raise ConfigError(f"{path} is not valid YAML: {err}") from err
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping at the top level, got {type(data).__name__}")
    return data
