"""Method and evaluation resolution: a method's `base` chain merged into one definition of
its policies, an evaluation's settings for one dataset, fractions turned into numbers."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping

from study.config.core import ConfigError, dataset_params, deep_merge, parse_fraction

# The policies that only make sense with an adversary, and their value that needs none.
_ADVERSARIAL_POLICIES = {"targets": "untargeted", "epsilon": "fixed", "loss": "ce"}


def method_definition(params: Mapping, name: str, _seen: tuple[str, ...] = ()) -> dict:
    """A method's params entry with its `base` chain merged in (the derived method wins)."""
    methods = params["methods"]
    if name not in methods:
        raise ConfigError(f"unknown method {name!r}; defined in params 'methods': {', '.join(sorted(methods))}")
    if name in _seen:
        raise ConfigError(f"method {name!r}: circular `base` chain {' -> '.join([*_seen, name])}")
    method = copy.deepcopy(dict(methods[name] or {}))
    base = method.pop("base", None)
    if base is None:
        return method
    return deep_merge(method_definition(params, base, (*_seen, name)), method)


def resolve_method(params: Mapping, name: str) -> dict:
    """The policies of a method (study.train.policies), fractions resolved; without the
    run-level keys `train`, `init_from` and `validation_attack` (run_config puts those into the run)
    and `compare_with` (which method it is compared with: `comparison_baseline`)."""
    method = method_definition(params, name)
    for run_level in ("train", "init_from", "validation_attack", "compare_with"):
        method.pop(run_level, None)
    adv = method.get("adversary")
    if adv:
        for key in ("eps", "alpha"):
            adv[key] = parse_fraction(adv[key])
    return method


# Policies that make a method more than a training objective (a fairness method, or averaging).
_ADDED_POLICIES = ("targets", "epsilon", "weights", "averaging", "regularizer")


def _plain(method: Mapping) -> bool:
    """Whether a resolved method is a training objective alone (PGD-AT, TRADES, FAT)."""
    return (not any(method.get(k) for k in _ADDED_POLICIES)
            and (method.get("loss") or {}).get("lambda2") is None)


def comparison_baseline(params: Mapping, name: str) -> str | None:
    """The method `name` is compared with (figure 13, the reproduction report): its
    `compare_with`; else, for a fine-tuning method, the run it starts from; else the nearest
    method of its `base` chain that is a training objective alone. None for such a method."""
    definition = method_definition(params, name)
    if definition.get("compare_with"):
        return definition["compare_with"]
    if definition.get("init_from"):
        return definition["init_from"]
    if _plain(resolve_method(params, name)):
        return None
    base = (params["methods"][name] or {}).get("base")
    while base is not None:
        if _plain(resolve_method(params, base)):
            return base
        base = (params["methods"][base] or {}).get("base")
    return None


def present_baseline(params: Mapping, name: str, present: Iterable[str]) -> str | None:
    """Of the methods `present` (a figure's, a report's), the one `name` is compared with:
    its `comparison_baseline` or a method with the same policies (`at` for `pgd_at`)."""
    baseline = comparison_baseline(params, name)
    if baseline is None:
        return None
    present = list(present)
    if baseline in present:
        return baseline
    wanted = resolve_method(params, baseline)
    for other in present:
        try:
            if other != name and resolve_method(params, other) == wanted:
                return other
        except ConfigError:
            continue
    return None


def check_method(params: Mapping, name: str) -> None:
    """A method's `base` and `init_from` name methods that exist, and its policies are
    consistent (the policy names themselves are checked by the params schema)."""
    definition = method_definition(params, name)
    parent = definition.get("init_from")
    if parent is not None and parent not in params["methods"]:
        raise ConfigError(f"method {name!r}: init_from names unknown method {parent!r}; "
                          f"defined: {', '.join(sorted(params['methods']))}")
    versus = definition.get("compare_with")
    if versus is not None and versus not in params["methods"]:
        raise ConfigError(f"method {name!r}: compare_with names unknown method {versus!r}; "
                          f"defined: {', '.join(sorted(params['methods']))}")
    method = resolve_method(params, name)
    adaptive = [k for k, plain in _ADVERSARIAL_POLICIES.items() if (method.get(k) or {}).get("type", plain) != plain]
    if method.get("adversary") is None and adaptive:
        raise ConfigError(f"method {name!r}: policies {adaptive} need an adversary; the method has adversary: null")


def resolve_evaluation(params: Mapping, name: str, dataset: str | None = None) -> dict:
    """One evaluation's settings, with `per_dataset[dataset]` applied when a dataset is given."""
    if dataset is not None:
        params = dataset_params(params, dataset)
    if name not in params["evaluations"]:
        raise ConfigError(f"unknown evaluation {name!r}; defined: {', '.join(sorted(params['evaluations']))}")
    ev = copy.deepcopy(dict(params["evaluations"][name]))
    for key in ("eps", "alpha"):
        if key in ev:
            ev[key] = parse_fraction(ev[key])
    ev["name"] = name
    ev.setdefault("test_per_class", params["evaluate"].get("test_per_class"))
    ev.setdefault("batch_size", params["evaluate"].get("batch_size", "auto"))
    ev.setdefault("seed", params["evaluate"].get("seed", 0))
    return ev
