"""Method and evaluation resolution: a method's `base` chain merged into one definition of
its policies, an evaluation's settings for one dataset, fractions turned into numbers."""

from __future__ import annotations

from collections.abc import Iterable

from study.config.core import ConfigError, deep_merge, parse_fraction
from study.config.requirements import method_problems
from study.config.types import Method, MethodEntry, Params, TrainSettings, parse

#: the heads of a `differs_in` path: a policy, or a run-level key (`train.<setting>`)
POLICIES = tuple(Method.model_fields)
RUN_LEVEL = ("init_from", "validation_attack", "train")


def method_definition(params: Params, name: str, _seen: tuple[str, ...] = ()) -> dict:
    """A method's params entry with its `base` chain merged in (the derived method wins), as
    written: a run config's `method_config` copies it (its hash is the run id's)."""
    methods = params.methods
    if name not in methods:
        raise ConfigError(f"unknown method {name!r}; defined in params 'methods': {', '.join(sorted(methods))}")
    if name in _seen:
        raise ConfigError(f"method {name!r}: circular `base` chain {' -> '.join([*_seen, name])}")
    entry = methods[name]
    method = entry.set_fields() if entry is not None else {}
    base = method.pop("base", None)
    if base is None:
        return method
    return deep_merge(method_definition(params, base, (*_seen, name)), method)


def method_entry(params: Params, name: str) -> MethodEntry:
    """A method's params entry with its `base` chain merged in, typed."""
    return parse(MethodEntry, method_definition(params, name), f"methods.{name}")


def resolve_method(params: Params, name: str) -> dict:
    """The policies of a method (study.train.policies), fractions resolved; without the
    run-level keys `train`, `init_from` and `validation_attack` (run_config puts those into the run),
    `compare_with` (which method it is compared with: `comparison_baseline`) and `differs_in`
    (what differs from it: study.config.comparisons), which no run reads.

    The mapping holds the keys as written (a run config's `method_config`: the types' defaults
    would change its run id); `Method` reads it."""
    method = method_definition(params, name)
    for run_level in ("train", "init_from", "validation_attack", "compare_with", "differs_in"):
        method.pop(run_level, None)
    adv = method.get("adversary")  # the entry as written, fractions still strings
    if adv:
        for key in ("eps", "alpha"):
            adv[key] = parse_fraction(adv[key])
    parse(Method, method, f"methods.{name} (its `base` chain merged)")
    return method


# Policies that make a method more than a training objective (a fairness method, or averaging).
_ADDED_POLICIES = ("targets", "epsilon", "weights", "averaging", "regularizer")


def _plain(method: Method) -> bool:
    """Whether a resolved method is a training objective alone (PGD-AT, TRADES, FAT)."""
    return (not any(getattr(method, k) for k in _ADDED_POLICIES)
            and (method.loss is None or method.loss.lambda2 is None))


def resolved_method(params: Params, name: str) -> Method:
    """A method of params, resolved (its `base` chain merged) and typed: where params' methods are parsed."""
    return Method.model_validate(resolve_method(params, name))


def comparison_baseline(params: Params, name: str) -> str | None:
    """The method `name` is compared with (figure 13, the reproduction report): its
    `compare_with`; else, for a fine-tuning method, the run it starts from; else the nearest
    method of its `base` chain that is a training objective alone. None for such a method."""
    definition = method_entry(params, name)
    if definition.compare_with:
        return definition.compare_with
    if definition.init_from:
        return definition.init_from
    if _plain(resolved_method(params, name)):
        return None
    base = _entry(params, name).base
    while base is not None:
        if _plain(resolved_method(params, base)):
            return base
        base = _entry(params, base).base
    return None


def _entry(params: Params, name: str) -> MethodEntry:
    """A method's own entry, its `base` not merged in."""
    entry = params.methods[name]
    return entry if entry is not None else MethodEntry()


def present_baseline(params: Params, name: str, present: Iterable[str]) -> str | None:
    """Of the methods `present` (a figure's, a report's), the one `name` is compared with:
    its `comparison_baseline` or a method with the same policies (`at` for `pgd_at`)."""
    baseline = comparison_baseline(params, name)
    if baseline is None:
        return None
    present = list(present)
    if baseline in present:
        return baseline
    wanted = resolved_method(params, baseline)
    for other in present:
        try:
            if other != name and resolved_method(params, other) == wanted:
                return other
        except ConfigError:
            continue
    return None


def check_method(params: Params, name: str) -> None:
    """A method's `base` and `init_from` name methods that exist, and its policies and training
    attack are what training needs (study.config.requirements; the policy names themselves are
    checked by the types)."""
    definition = method_entry(params, name)
    methods = params.methods
    for key in ("init_from", "compare_with"):
        other = getattr(definition, key)
        if other is not None and other not in methods:
            raise ConfigError(f"method {name!r}: {key} names unknown method {other!r}; "
                              f"defined: {', '.join(sorted(methods))}")
    if definition.differs_in is not None:
        check_differs_in(name, definition.differs_in)
    problems = method_problems(resolved_method(params, name))
    if problems:
        raise ConfigError(f"method {name!r}: " + "; ".join(problems))


def check_differs_in(name: str, paths: Iterable[str]) -> None:
    """Each `differs_in` path starts with a policy, a run-level key or `train.<setting>`."""
    for path in paths:
        head, _, rest = path.partition(".")
        if head not in (*POLICIES, *RUN_LEVEL):
            raise ConfigError(f"method {name!r}: differs_in names {path!r}; valid heads: "
                              f"{', '.join((*POLICIES, *RUN_LEVEL))} (a dotted sub-key names one field)")
        if head == "train" and rest.split(".")[0] not in TrainSettings.model_fields:
            raise ConfigError(f"method {name!r}: differs_in names {path!r}; valid train settings: "
                              f"{', '.join(TrainSettings.model_fields)}")


def resolve_evaluation(params: Params, name: str, dataset: str | None = None) -> dict:
    """One evaluation's settings, with `per_dataset[dataset]` applied when a dataset is given:
    the entry as written (its JSON is the evaluate job's argument, its hash part of a record),
    fractions as numbers, and params `evaluate`'s test_per_class, batch_size and seed where the
    entry has none."""
    if dataset is not None:
        params = params.for_dataset(dataset)
    if name not in params.evaluations:
        raise ConfigError(f"unknown evaluation {name!r}; defined: {', '.join(sorted(params.evaluations))}")
    ev = params.evaluations[name].set_fields()
    for key in ("eps", "alpha"):
        if key in ev:
            ev[key] = parse_fraction(ev[key])
    ev["name"] = name
    ev.setdefault("test_per_class", params.evaluate.test_per_class)
    ev.setdefault("batch_size", params.evaluate.batch_size)
    ev.setdefault("seed", params.evaluate.seed)
    return ev
