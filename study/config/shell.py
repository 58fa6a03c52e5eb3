"""Pure helpers of the workflow's rules (workflow/rules/*.smk): the words of a `study` command
line and a rule's wildcard constraints, from values alone (no config, no path of the study)."""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Callable, Iterable, Mapping


def one_of(names: Iterable[str]) -> str:
    """A regex of exactly these names (one that never matches when there are none)."""
    return "|".join(re.escape(n) for n in sorted(names)) or r"(?!x)x"


def quoted_json(obj) -> str:
    return shlex.quote(json.dumps(obj, sort_keys=True))


def cli_options(options: Mapping) -> str:
    """`--name value...` of each option that has a value (a list gives several values)."""
    words = []
    for name, value in options.items():
        if value is not None:
            values = value if isinstance(value, list) else [value]
            words += [f"--{name.replace('_', '-')}", *(shlex.quote(str(v)) for v in values)]
    return " ".join(words)


def folder_of(name: str, of: str = "output") -> Callable:
    """A rule's param: the folder of its output (or input) file `name`, e.g. the --out-dir of a
    command that writes several tables, derived from the files rather than written twice."""
    if of == "input":
        return lambda wildcards, input: os.path.dirname(input[name])
    return lambda wildcards, output: os.path.dirname(output[name])
