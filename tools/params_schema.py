"""The JSON schema of params (workflow/schemas/params.schema.yaml), generated from the types
of study.config.types so that the two never disagree, and the names that `figures` may list
from the figure catalog (study.figures.catalog), which the configuration's layer cannot read.

    python -m tools.params_schema --write

The schema is written inline (no `$ref`), an optional value as its schema with "null" added
to its type, so that it reads like the hand-written schema it replaces and tools that look up
a key's settings (`properties.methods.additionalProperties.properties.loss`) find them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from study.config.types import Params
from study.figures.catalog import FIGURES
from study.io import atomic_write_text

SCHEMA_FILE = Path("workflow/schemas/params.schema.yaml")
_HEADER = ("# Generated from study/config/types.py and study/figures/catalog.py by `python -m tools.params_schema\n"
           "# --write`; edit those, not this file (tests/unit/test_config_schema.py fails when they differ).\n")
# pydantic's names for what the schema says anyway (a class name, the docstring's copy per use)
_DROPPED = ("title",)


def _inline(node: Any, defs: dict) -> Any:
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = _inline(defs[node["$ref"].rsplit("/", 1)[-1]], defs)
        return {**target, **{k: _inline(v, defs) for k, v in node.items() if k != "$ref"}}
    out = {k: _inline(v, defs) for k, v in node.items() if k not in _DROPPED and k != "$defs"}
    out = _named_keys(out)
    for key in ("anyOf", "oneOf"):
        if key in out:
            out = _nullable(out, key)
    return out


def _named_keys(node: dict) -> dict:
    """A mapping whose keys are names with a pattern (pydantic's `patternProperties`) as its values'
    schema under additionalProperties and the pattern as propertyNames: a key that does not match is
    refused, not let through, and a key's settings stay at `additionalProperties`."""
    patterns = node.get("patternProperties")
    if not isinstance(patterns, dict) or len(patterns) != 1 or "additionalProperties" in node:
        return node
    ((pattern, values),) = patterns.items()
    rest = {k: v for k, v in node.items() if k != "patternProperties"}
    return {**rest, "additionalProperties": values, "propertyNames": {"pattern": pattern}}


def _nullable(node: dict, key: str) -> dict:
    """`anyOf: [S, {type: null}]` as S with "null" among its types (or its enum)."""
    options = node[key]
    rest = [o for o in options if o != {"type": "null"}]
    if len(rest) != 1 or len(options) != 2:
        return node
    (inner,) = rest
    merged = {**inner, **{k: v for k, v in node.items() if k != key}}
    if isinstance(inner.get("type"), str):
        merged["type"] = [inner["type"], "null"]
    elif "enum" in inner:
        merged["enum"] = [*inner["enum"], None]
    elif "const" in inner:
        merged = {**{k: v for k, v in merged.items() if k != "const"}, "enum": [inner["const"], None]}
    else:
        return node
    return merged


def params_schema() -> dict:
    """The JSON schema (draft 2020-12) of params.yaml merged with a preset."""
    raw = Params.model_json_schema(by_alias=True, mode="validation")
    schema = _inline(raw, raw.get("$defs", {}))
    schema["properties"]["figures"]["items"] = {"enum": list(FIGURES), "type": "string"}
    return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}


def schema_text() -> str:
    return _HEADER + yaml.safe_dump(params_schema(), sort_keys=False, width=120, allow_unicode=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.params_schema", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help=f"write the schema to --out (default {SCHEMA_FILE})")
    parser.add_argument("--out", type=Path, default=SCHEMA_FILE)
    args = parser.parse_args(argv)
    text = schema_text()
    if args.write:
        atomic_write_text(args.out, text)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
