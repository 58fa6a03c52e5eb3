"""The study's configuration, one module per job:

    core      the error type, fractions ('8/255'), merging (a dataset's `per_dataset` entry)
    params    params.yaml + preset + overrides, the schema, the checks of every name used, parsed
              once into the frozen `Params` (types; its `for_dataset` views)
    grid      the cells of an experiment group's grid
    methods   method (`base` chains) and evaluation resolution
    plan      the runs, constructions and feature runs of the configured study
    requirements  what training needs of a method and of a run config beyond the types, checked
              where they enter (parse_params, ConfigSpec.parse), and the accessors training reads
    pairs     the compared pairs and their declared differences, checked by parse_params
              (comparisons: what does differ between a pair's run configs)
    protocols the checkpoint selection protocols (validation; published: published_protocol)
    spec      a run config and an evaluation parsed where they enter, typed; the canonical form
              of the typed value is the identity, its hash the run key and the run id's tail

Training settings and a run directory's files live in `study.run_directory`. The names below are the
package's public face, so callers need not know which module holds what.
"""

from study.config.core import (
    PER_DATASET_SECTIONS,
    ConfigError,
    configured_mirror,
    deep_merge,
    parse_fraction,
    set_dotted,
)
from study.config.grid import grid_combinations
from study.config.methods import (
    check_method,
    comparison_baseline,
    method_definition,
    present_baseline,
    resolve_evaluation,
    resolve_method,
)
from study.config.params import (
    available_presets,
    coerce_overrides,
    load_params,
    parse_params,
    read_yaml,
    validate_params,
)
from study.config.plan import (
    Construction,
    RunSpec,
    constructions,
    feature_runs,
    plan_runs,
    prepared_name,
    run_config,
)
from study.config.spec import ConfigSpec, EvaluationSpec, run_key
from study.config.types import Params

__all__ = [
    "PER_DATASET_SECTIONS", "ConfigError", "ConfigSpec", "Construction", "EvaluationSpec", "Params", "RunSpec",
    "available_presets", "check_method",
    "coerce_overrides", "comparison_baseline", "configured_mirror",
    "constructions", "deep_merge", "feature_runs", "grid_combinations",
    "load_params", "parse_params", "method_definition", "parse_fraction", "plan_runs", "prepared_name",
    "present_baseline",
    "read_yaml", "resolve_evaluation", "resolve_method", "run_config", "run_key", "set_dotted",
    "validate_params",
]
