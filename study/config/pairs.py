"""The compared pairs of the configured study, checked where the params are parsed: each method of
a group whose comparison baseline the group runs (its `compare_with`, a fine-tune's parent, the
nearest plain method of its `base` chain: study.config.methods.present_baseline), and each pair a
group declares (`compare`), with the differences the pair declares (`differs_in`).

A compared method without `differs_in`, a declared pair whose method or control its groups do not
run, or a cross-group control without the group's datasets and model is a one-line ConfigError
here, for every front end (load_params: `study plan`, `study preflight`, the DAG, `dvc repro`),
instead of in the reproduction report after the runs it compares have trained. What does differ
between a pair's two run configs is study.config.comparisons' (it builds them as the plan does).
"""

from __future__ import annotations

from dataclasses import dataclass

from study.config.core import ConfigError
from study.config.methods import POLICIES, RUN_LEVEL, check_differs_in, method_entry, present_baseline
from study.config.types import DeclaredPair, ExperimentGroup, Params


@dataclass(frozen=True)
class Pair:
    """One compared pair of one experiment group, as declared."""

    group: ExperimentGroup
    method: str
    baseline: str
    declared: tuple[str, ...]
    #: the group whose runs of `baseline` are the control: `group` but for a pair a group declares
    #: against another group's runs
    control_group: ExperimentGroup


def declared_differences(params: Params, method: str, baseline: str = "", group: str = "") -> tuple[str, ...]:
    """A compared method's `differs_in` (its paths checked); a one-line ConfigError naming the
    method, what it is compared with and where, and the valid heads, where it has none."""
    declared = method_entry(params, method).differs_in
    if declared is None:
        where = f" {baseline!r} in experiment group {group!r}" if baseline and group else " another method"
        raise ConfigError(f"method {method!r} is compared with{where} but declares no `differs_in`; "
                          f"list what differs, e.g. differs_in: [epsilon, averaging] (heads: "
                          f"{', '.join((*POLICIES, *RUN_LEVEL))})")
    check_differs_in(method, declared)
    return tuple(declared)


def find_group(params: Params, name: str) -> ExperimentGroup:
    """The experiment group `name`; a ConfigError naming the defined ones where there is none."""
    try:
        return params.group(name)
    except KeyError as e:
        raise ConfigError(e.args[0]) from None


def present_methods(params: Params, group: ExperimentGroup) -> list[str]:
    """The methods a group lists, then the runs planned for it that it does not list (the
    parents its methods fine-tune)."""
    present = list(group.methods)
    for method in group.methods:
        parent = method_entry(params, method).init_from
        while parent is not None and parent not in present:
            present.append(parent)
            parent = method_entry(params, parent).init_from
    return present


def group_baseline(params: Params, group: ExperimentGroup, method: str) -> str | None:
    """The method `method` is compared with in `group`, where that group runs one."""
    return present_baseline(params, method, present_methods(params, group))


def compared_pairs(params: Params) -> list[Pair]:
    """Every compared pair of every experiment group, checked: each method of a group whose
    comparison baseline the group runs (lists it, or trains it for a fine-tune), then the pairs
    the group declares (`compare`)."""
    out = []
    for group in params.experiments:
        for method in group.methods:
            baseline = group_baseline(params, group, method)
            if baseline is not None:
                declared = declared_differences(params, method, baseline, group.group)
                out.append(Pair(group, method, baseline, declared, group))
        out += [_declared_pair(params, group, pair) for pair in group.compare or []]
    return out


def _declared_pair(params: Params, group: ExperimentGroup, pair: DeclaredPair) -> Pair:
    """A pair a group declares, its method and control checked against the runs the groups plan."""
    where = f"experiment group {group.group!r}: compare"
    if pair.method not in present_methods(params, group):
        raise ConfigError(f"{where}: method {pair.method!r} is not run by the group; "
                          f"its methods: {', '.join(present_methods(params, group))}")
    control_group = find_group(params, pair.control_group) if pair.control_group is not None else group
    if pair.control not in present_methods(params, control_group):
        raise ConfigError(f"{where}: control {pair.control!r} is not run by group {control_group.group!r}; "
                          f"its methods: {', '.join(present_methods(params, control_group))}")
    if control_group is not group and (not set(group.dataset_names) <= set(control_group.dataset_names)
                                       or group.models[0] not in control_group.models):
        raise ConfigError(f"{where}: group {control_group.group!r} runs {pair.control!r} on "
                          f"{', '.join(control_group.dataset_names)} with {', '.join(control_group.models)}; "
                          f"a cross-group control needs the group's datasets and its model {group.models[0]!r}")
    check_differs_in(pair.method, pair.differs_in)
    return Pair(group, pair.method, pair.control, tuple(pair.differs_in), control_group)
