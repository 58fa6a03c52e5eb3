"""Argument types and argument groups that several `study` subcommands share."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from study.config.types import Params

#: the `sub` every `add_<command>` registers its command with (`build_parser`'s add_subparsers)
SubParsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def json_arg(text: str) -> dict:
    """Inline JSON, or @path to a JSON file."""
    try:
        if text.startswith("@"):
            return json.loads(Path(text[1:]).read_text())
        return json.loads(text)
    except (OSError, json.JSONDecodeError) as err:
        raise argparse.ArgumentTypeError(f"not valid JSON (or @file): {text[:80]!r}: {err}") from err


def typed_json(kind: str, what: str) -> Callable[[str], dict]:
    """An argument type: inline JSON (or @file) checked against a type of study.config.types,
    one line naming every bad key path otherwise. The mapping as given is what the command
    gets: its JSON is part of the records (and their hashes) the command writes."""
    def typed(text: str) -> dict:
        from study.config import types

        value = json_arg(text)
        try:
            types.parse(getattr(types, kind), value, what)
        except types.ConfigError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        return value

    typed.__name__ = kind  # argparse names the type in its messages
    return typed


def spec_json(kind: str, what: str, job: str = "EvaluationJob", zoo: bool | None = None) -> Callable[[str], object]:
    """An argument type: inline JSON (or @file) parsed where argparse hands it over into the
    value the command works with (study.config.spec: `ConfigSpec` of a run config, `EvaluationSpec`
    of an evaluation job, `job` naming which), one line naming every bad key path otherwise.
    `zoo` (True or False) says which kind of run config the command takes."""
    def parsed(text: str) -> object:
        from study.config import evaluations, spec, types

        value = json_arg(text)
        try:
            if kind == "ConfigSpec":
                result = spec.ConfigSpec.parse(value, what)
            else:
                return spec.EvaluationSpec.parse(value, what, getattr(evaluations, job))
        except types.ConfigError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        if zoo is not None and isinstance(result.config, types.ZooRunConfig) != zoo:
            want = "a zoo model's run config (with a 'zoo' entry)" if zoo else "a trained run's config (no 'zoo' entry)"
            raise argparse.ArgumentTypeError(f"{what}: this command takes {want}; got keys {', '.join(sorted(value))}")
        return result

    parsed.__name__ = "RunConfig" if kind == "ConfigSpec" else job  # argparse names the type in its messages
    return parsed


def add_params_args(p: argparse.ArgumentParser) -> None:
    """The arguments of a command that reads the study's configuration (params.yaml and a preset)."""
    p.add_argument("--params", default="params.yaml", help="the study's params.yaml")
    p.add_argument("--preset", default=None, help="preset overlay (workflow/presets/NAME.yaml)")
    p.add_argument("--presets-dir", default="workflow/presets")
    p.add_argument("--schema", default="workflow/schemas/params.schema.yaml")
    p.add_argument("--config-overrides", type=_json_mapping, default={},
                   help="JSON of the values given with Snakemake's --config (as the workflow passes them), "
                        "merged after the preset as the workflow merged them")


def _json_mapping(text: str) -> dict:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as err:
        raise argparse.ArgumentTypeError(f"not JSON ({err.msg} at character {err.pos}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object of config values, got {text!r}")
    return value


def load_params_args(args: argparse.Namespace) -> Params:
    """The study's parameters as the arguments of `add_params_args` select them."""
    from study.config import load_params

    # --preset, then the --config values: load_params merges them after the preset, as the workflow does
    overrides = {**({"preset": args.preset} if args.preset else {}), **args.config_overrides}
    return load_params(args.params, overrides, presets_dir=args.presets_dir, schema_path=args.schema)


def device_args() -> argparse.ArgumentParser:
    """Where and how visibly a command that runs a model works."""
    device = argparse.ArgumentParser(add_help=False)
    device.add_argument("--device", default="auto", help="auto (the GPU if there is one), cpu, cuda or cuda:N")
    device.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores)")
    device.add_argument("--no-progress", action="store_true", help="no progress bars (log files)")
    return device


def run_args() -> argparse.ArgumentParser:
    """The arguments every command that loads a run shares."""
    common = argparse.ArgumentParser(add_help=False, parents=[device_args()])
    common.add_argument("--data", required=True, help="prepared dataset file (study prepare)")
    common.add_argument("--run-dir", required=True)
    return common
