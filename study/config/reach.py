"""Whether a value of the train section set on the command line (`snakemake --config`, `dvc exp
run -S`, which study.stage hands on as --config) reaches every run it seems to set.

A run's training settings are params' `train` with the dataset's (`per_dataset`), the experiment
group's, its grid cell's and its method's own `train` merged over it (study.config.plan), and the
constructed datasets' runs take `features.train.train`: a value of `train.epochs` given on the
command line loses to any of those that sets `epochs`. Applying it over them would change what a
method or a comparison is (FRL's fine-tuning epochs, a grid over epochs), so such a value is
refused in one line naming the runs it would not reach and the keys that set it for them; set
those keys as well (or instead) and the value reaches every run."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial

from study.config.core import ConfigError
from study.config.grid import grid_combinations
from study.config.methods import method_entry
from study.config.plan import feature_group, train_settings
from study.config.types import ExperimentGroup, Params

_MISSING = object()


def _leaves(value: object, where: str) -> list[tuple[str, object]]:
    if isinstance(value, Mapping) and value:
        return [leaf for k, v in value.items() for leaf in _leaves(v, f"{where}.{k}")]
    return [(where, value)]


def _get(mapping: object, dotted: str) -> object:
    for key in dotted.split("."):
        if not isinstance(mapping, Mapping) or key not in mapping:
            return _MISSING
        mapping = mapping[key]
    return mapping


def _same(a: object, b: object) -> bool:
    return a == b and isinstance(a, bool) == isinstance(b, bool)


def _setter(params: Params, group: ExperimentGroup, dataset: str, method: str, cell: Mapping, key: str) -> str:
    """The key of the block that sets `train.<key>` for this run, the highest in precedence first."""
    if _get(method_entry(params.for_dataset(dataset), method).train or {}, key) is not _MISSING:
        return f"methods.{method}.train.{key}"
    if _get(cell, key) is not _MISSING:
        return f"experiments[{group.group}].grid"
    if _get(group.train, key) is not _MISSING:
        return f"experiments[{group.group}].train.{key}"
    return f"per_dataset.{dataset}.train.{key}"


#: a key's setter: the block that sets `train.<key>` for a run
Setter = Callable[[str], str]


def _runs(params: Params) -> Iterator[tuple[str, Setter, dict]]:
    """(run label, setter of a key, effective train section) of every planned run's training."""
    for group in params.experiments:
        for dataset in group.dataset_names:
            for cell in grid_combinations(group):
                chain = list(group.methods)
                for method in chain:  # the fine-tuned parents train too
                    parent = method_entry(params.for_dataset(dataset), method).init_from
                    if parent is not None and parent not in chain:
                        chain.append(parent)
                for method in chain:
                    raw, _ = train_settings(params, group, method, dataset, cell)
                    setter = partial(_setter, params, group, dataset, method, cell)
                    yield f"{group.group}/{dataset}/{method}", setter, raw
    if params.features is not None:
        train, source = params.features.train, params.features.sources.standard.group
        for dataset in next((g.dataset_names[:1] for g in params.experiments if g.group == source), []):
            raw, _ = train_settings(params, feature_group(dataset, train), train.method, dataset)
            yield f"features/{dataset}/{train.method}", lambda key: f"features.train.train.{key}", raw


def check_train_overrides(params: Params, overrides: Mapping) -> None:
    """A ConfigError line for a command-line value of the train section that some run's own
    settings override (see the module's docstring); `overrides` as load_params merged them."""
    train = overrides.get("train")
    if not isinstance(train, Mapping):
        return
    for key, value in _leaves(train, ""):
        key = key.lstrip(".")
        missed: dict[str, set[str]] = {}
        for label, setter, raw in _runs(params):
            effective = _get(raw, key)
            if effective is not _MISSING and not _same(effective, value):
                missed.setdefault(setter(key), set()).add(f"{label} ({effective})")
        if missed:
            count = sum(map(len, missed.values()))
            where = "; ".join(f"{setter}: {', '.join(sorted(runs))}" for setter, runs in missed.items())
            settable = [s for s in missed if not s.startswith("experiments[")]  # a group's entry is no dotted key
            example = f" (e.g. -S {settable[0]}={value}, or --config with the same key)" if settable else ""
            raise ConfigError(
                f"train.{key}={value} (set on the command line) does not reach {count} run(s) whose own settings "
                f"set it: {where}; set those keys as well{example} or leave train.{key} as committed")
