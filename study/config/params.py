"""Loading the study's parameters: params.yaml, the preset overlay its `preset` key names,
command-line overrides, the JSON-schema check, and the checks that every name an
experiment group uses is defined, so a typo fails before any job runs.

Both front ends (Snakemake and the `study` command) resolve the configuration through
`load_params`, so a preset means the same thing whichever tool selects it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping
from pathlib import Path

import jsonschema
import yaml

from study.config.core import (
    ConfigError,
    deep_merge,
    resolve_auto_variants,
    set_dotted,
)
from study.config.grid import grid_combinations
from study.config.methods import check_method
from study.config.pairs import compared_pairs
from study.config.types import ExperimentGroup, Params, parse
from study.config.yamlfile import load_yaml, read_yaml

DEFAULT_PARAMS = Path("params.yaml")
DEFAULT_PRESETS = Path("workflow/presets")
DEFAULT_SCHEMA = Path("workflow/schemas/params.schema.yaml")


def available_presets(presets_dir: Path = DEFAULT_PRESETS) -> list[str]:
    return sorted(p.stem for p in Path(presets_dir).glob("*.yaml"))


def non_finite_paths(value: object, where: str = "") -> list[str]:
    """Key paths of NaN or infinite numbers (JSON schema bounds do not exclude NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return [f"{where}: {value} is not a finite number"]
    if isinstance(value, Mapping):
        return [msg for k, v in value.items() for msg in non_finite_paths(v, f"{where}.{k}" if where else str(k))]
    if isinstance(value, list):
        return [msg for i, v in enumerate(value) for msg in non_finite_paths(v, f"{where}[{i}]")]
    return []


def _schema_message(err: jsonschema.ValidationError) -> str:
    """`key.path: what is wrong`, from the alternative of a oneOf/anyOf that came closest."""
    err = jsonschema.exceptions.best_match([err])
    where = ".".join(str(p) for p in err.absolute_path) or "(top level)"
    return f"{where}: {err.message}"


def validate_params(params: Mapping, schema_path: Path = DEFAULT_SCHEMA) -> None:
    """One ConfigError line naming every bad key path (up to 10) and what is valid there."""
    schema = read_yaml(Path(schema_path))
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(params), key=lambda e: list(e.absolute_path))
    messages = non_finite_paths(params) + [_schema_message(err) for err in errors]
    if messages:
        raise ConfigError("invalid configuration: " + "; ".join(messages[:10]))


def coerce_overrides(overrides: Mapping) -> dict:
    """Command-line overrides as users type them, as one nested mapping: dotted keys
    (`train.epochs=5`) set one nested value, and a value written in YAML flow style
    (`train={epochs: 5}` or `[0, 1]`, which Snakemake and DVC pass on as a string) is
    parsed. Later keys win; mappings merge into the params key by key."""
    out: dict = {}
    for key, value in overrides.items():
        if isinstance(value, str) and value.strip()[:1] in ("{", "["):
            try:
                value = load_yaml(value, f"override {key}")
            except yaml.YAMLError as err:
                raise ConfigError(f"override {key}={value!r} is not valid YAML: {err}") from None
        else:  # Snakemake hands `features=null` on as the string 'null'
            value = _typed_scalars(value)
        out = set_dotted(out, str(key), value)
    return out


def _typed_scalars(value: object) -> object:
    """Snakemake parses `--config 'train={epochs: 5}'` with YAML's base loader, which keeps
    every scalar a string ({'epochs': '5'}); read each as YAML would ('5' -> 5, '8/255'
    stays a string)."""
    if isinstance(value, Mapping):
        return {k: _typed_scalars(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_typed_scalars(v) for v in value]
    if isinstance(value, str):
        try:
            typed = yaml.safe_load(value)
        except yaml.YAMLError:
            return value
        return typed if typed is None or isinstance(typed, (bool, int, float)) else value
    return value


def load_params(
    params_path: Path | str = DEFAULT_PARAMS,
    overrides: Mapping | None = None,
    presets_dir: Path | str = DEFAULT_PRESETS,
    schema_path: Path | str = DEFAULT_SCHEMA,
    base: Mapping | None = None,
) -> Params:
    """params.yaml, then the preset named by its `preset` key (or by the overrides), then
    the overrides (command-line values win over the preset they select; see
    `coerce_overrides` for the forms they take), parsed once (`parse_params`)."""
    overrides = coerce_overrides(overrides or {})
    params = dict(base) if base is not None else read_yaml(Path(params_path))
    if base is None:
        # the values params.yaml sets (where it differs from the published settings: `dvc exp run -S`,
        # an applied experiment, an edit) win over the preset, the command line's over both
        from study.config.overrides import set_in_params

        overrides = deep_merge(coerce_overrides(set_in_params(params, Path(params_path))), overrides)
    # A front end that already merged the overrides in their raw form (Snakemake's config
    # holds `train.epochs` as a top-level key) leaves copies the schema would reject.
    params = {k: v for k, v in params.items() if "." not in str(k)}
    preset = overrides.get("preset", params.get("preset"))  # loading: the preset picks the overlay before typing
    sources = [] if base is not None else [str(params_path)]
    if preset is not None:
        preset_file = Path(presets_dir) / f"{preset}.yaml"
        if not preset_file.exists():
            raise ConfigError(
                f"unknown preset {preset!r} (no {preset_file}); valid presets: "
                f"{', '.join(available_presets(Path(presets_dir)))}"
            )
        params = deep_merge(params, read_yaml(preset_file))
        sources.append(f"preset {preset_file}")
    params = resolve_auto_variants(deep_merge(params, overrides))
    params["preset"] = preset
    if set(overrides) - {"preset"}:
        sources.append("command-line overrides")
    try:
        return parse_params(params, Path(schema_path))
    except ConfigError as err:
        # which files (and overrides) the bad value may come from
        raise ConfigError(f"{' + '.join(sources) or 'configuration'}: {err}") from None


def parse_params(params: Mapping, schema_path: Path | str = DEFAULT_SCHEMA) -> Params:
    """The study's params (params.yaml merged with a preset, or a mapping built by hand) as the
    frozen, typed `Params`, after every check (the types, the schema, each dataset's merged
    settings, every name an experiment group uses, what training needs of each method a group
    runs, each compared pair's declared differences): a ConfigError of one line otherwise. The one
    place the params are parsed; below it the library takes `Params`. (What a run needs of its
    dataset, epochs and split is checked where the plan makes its config: study.config.spec.)"""
    check_no_method_selection(params)
    # The types first (their message names the valid keys and values), then the schema that the
    # workflow documents and that is generated from them (tools/params_schema.py), so the two agree.
    typed: Params = parse(Params, params, "invalid configuration")
    validate_params(params, Path(schema_path))
    for dataset in typed.per_dataset:
        # The merged settings of each dataset must be as valid as the global ones.
        try:
            validate_params(typed.for_dataset(dataset).set_fields(), Path(schema_path))
        except ConfigError as err:
            raise ConfigError(f"per_dataset.{dataset}: {err}") from None
    _check_dataset_names(typed)
    _check_references(typed)
    _check_names_outside_groups(typed)
    _check_features(typed)
    # the pairs the reproduction report and figure 13 compare: refused here, not by the report's job
    compared_pairs(typed)
    return typed


def check_no_method_selection(params: Mapping) -> None:
    """The checkpoint rule belongs to the comparison, not to a method: a method's `selection`
    is refused with one line naming where it now lives."""
    for name, method in (params.get("methods") or {}).items():  # raw: a key the type would refuse, named first
        if isinstance(method, Mapping) and "selection" in method:
            raise ConfigError(f"methods.{name}.selection: the checkpoint rule is the comparison's, not a method's; "
                              "set it as train.selection (params.yaml's train section or the experiment group's "
                              "train: {selection: {score, from_epoch}})")


def _check_references(typed: Params) -> None:
    """Names used by experiment groups must be defined, so a typo fails before any job runs."""
    from study.data.registry import DATASETS, check_variant

    valid = ", ".join(sorted(DATASETS))
    for dataset, variant in typed.data.variants.items():
        if dataset not in DATASETS:
            raise ConfigError(f"data.variants: unknown dataset {dataset!r}; valid: {valid}")
        check_variant(dataset, variant)
    for dataset in typed.per_dataset:
        if dataset not in DATASETS:
            raise ConfigError(f"per_dataset: unknown dataset {dataset!r}; valid: {valid}")
    for group in typed.experiments:
        for dataset in group.dataset_names:
            if dataset not in DATASETS:
                raise ConfigError(f"experiment group {group.group!r}: unknown dataset {dataset!r}; valid: {valid}")
            check_variant(dataset, typed.variant(dataset))
            _check_group_names(typed.for_dataset(dataset), group, dataset)
        grid_combinations(group)  # a malformed grid fails here, before any job


def _check_dataset_names(typed: Params) -> None:
    """The datasets named outside the experiment groups (CIFAR-10-C's, a zoo entry's data): an unknown
    one would leave its figure's panels out of the plan without a word; and each variant named
    (data.variants, a zoo entry's), in one line rather than the registry's ValueError."""
    from study.data.registry import DATASETS, check_variant

    valid = ", ".join(sorted(DATASETS))
    for dataset, variant in typed.data.variants.items():
        if dataset in DATASETS and variant != "auto":
            try:
                check_variant(dataset, variant)
            except ValueError as err:
                raise ConfigError(f"data.variants.{dataset}: {err}") from None
    corruptions = typed.robustness.corruptions
    for dataset in corruptions.datasets if corruptions is not None else []:
        if dataset not in DATASETS:
            raise ConfigError(f"robustness.corruptions.datasets: unknown dataset {dataset!r}; valid: {valid}")
    for i, entry in enumerate(typed.zoo.models if typed.zoo is not None else []):
        if entry.data is not None and entry.data not in DATASETS:
            raise ConfigError(f"zoo.models[{i}].data: unknown dataset {entry.data!r}; valid: {valid}")
        if entry.variant is not None:
            try:
                check_variant(entry.data or entry.dataset, entry.variant)
            except ValueError as err:
                raise ConfigError(f"zoo.models[{i}].variant: {err}") from None


def _unknown(where: str, names: Iterable[str], valid: Collection[str], what: str) -> None:
    for name in names:
        if name not in valid:
            raise ConfigError(f"{where}: unknown {what} {name!r}; valid: {', '.join(sorted(valid)) or 'none'}")


def _check_names_outside_groups(typed: Params) -> None:
    """Groups, evaluations and bench settings named by the robustness, zoo and bench sections: an
    unknown one would leave its runs, panels or jobs out without a word (or name a missing file)."""
    groups, evaluations = {g.group for g in typed.experiments}, set(typed.evaluations)
    rob = typed.robustness
    _unknown("robustness.groups", rob.groups, groups, "experiment group")
    _unknown("robustness.checks.groups", rob.checks.groups or [], groups, "experiment group")
    _unknown("robustness.checks.reference", [rob.checks.reference], evaluations, "evaluation")
    if rob.corruptions is not None:
        _unknown("robustness.corruptions.groups", rob.corruptions.groups or [], groups, "experiment group")
    if (zoo := typed.zoo) is not None:
        for threat in ("Linf", "L2", "corruptions"):
            _unknown(f"zoo.evaluations.{threat}", getattr(zoo.evaluations, threat) or [], evaluations, "evaluation")
            named = getattr(zoo.figure_evaluations, threat)
            _unknown(f"zoo.figure_evaluations.{threat}", [named] if named else [], evaluations, "evaluation")
        for i, entry in enumerate(zoo.models):
            _unknown(f"zoo.models[{i}].evaluations", entry.evaluations or [], evaluations, "evaluation")
    if typed.bench is not None:
        _unknown("bench.default", typed.bench.default, typed.bench.settings, "bench setting")


def _check_group_names(typed: Params, group: ExperimentGroup, dataset: str) -> None:
    """Models, methods and evaluations of one group on one dataset (settings resolved for it)."""
    from study.models.registry import MODELS

    gname = group.group
    methods, evaluations = typed.methods, typed.evaluations
    for model in group.models:
        if model not in MODELS:
            raise ConfigError(
                f"experiment group {gname!r}: unknown model {model!r}; valid: {', '.join(MODELS)}"
            )
    for method in group.methods:
        if method not in methods:
            raise ConfigError(
                f"experiment group {gname!r}: unknown method {method!r}; "
                f"defined in params 'methods': {', '.join(sorted(methods))}"
            )
        check_method(typed, method)
    for ev in group.evaluations or typed.evaluate.default:
        if ev not in evaluations:
            raise ConfigError(
                f"experiment group {gname!r}: unknown evaluation {ev!r} on {dataset!r}; "
                f"defined in params 'evaluations' (and per_dataset.{dataset}): {', '.join(sorted(evaluations))}"
            )


def _check_features(typed: Params) -> None:
    feats = typed.features
    if feats is None:
        return
    methods, evaluations = typed.methods, typed.evaluations
    for role in ("standard", "robust"):
        method = getattr(feats.sources, role).method
        if method not in methods:
            raise ConfigError(f"features.sources.{role}: unknown method {method!r}; "
                              f"defined in params 'methods': {', '.join(sorted(methods))}")
    if feats.train.method not in methods:
        raise ConfigError(f"features.train.method: unknown method {feats.train.method!r}")
    for ev in feats.train.evaluations:
        if ev not in evaluations:
            raise ConfigError(f"features.train.evaluations: unknown evaluation {ev!r}; "
                              f"defined in params 'evaluations': {', '.join(sorted(evaluations))}")
