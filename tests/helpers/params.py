"""Params changed by a test: the mapping as loaded with some top-level sections replaced, parsed
again through the public entry (study.config.parse_params), as the study parses params.yaml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from study.config import Params, parse_params

SCHEMA = Path(__file__).resolve().parents[2] / "workflow/schemas/params.schema.yaml"


def changed(params: Params, **sections: Any) -> Params:
    """`params` with each named top-level section replaced by the value given, parsed again."""
    return parse_params({**params.set_fields(), **sections}, SCHEMA)
