"""Which runs each panel of the study's figures draws, from the plan (`study.config.plan_runs`).

A panel function returns `{key: (run ids, options)}`: the key holds the values of the fields
of the panel's file name (e.g. dataset, model, method), the options are those of its
`study figure` command that name no file (the workflow adds the tables and records it reads).
Nothing here knows a path; workflow/rules/common.smk maps panels onto files.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the plan's types import the figure catalog, which imports this module
    from study.config.types import RunConfig, ZooModel, ZooRunConfig

Panels = dict[tuple, tuple[list[str], dict]]


class Run(Protocol):  # study.config.RunSpec
    run_id: str
    groups: list[str]
    evaluations: list[str]
    kinds: list[str]
    checkpoints: list[str]

    @property
    def zoo(self) -> ZooModel: ...

    @property
    def dataset(self) -> str: ...

    @property
    def run(self) -> RunConfig | ZooRunConfig: ...


def is_mitigation_run(run: Run) -> bool:
    """Runs of the groups of `kind: mitigation` are figure 13's and stay out of the other figures."""
    return "mitigation" in run.kinds


def plain_runs(runs: Sequence[Run]) -> list[Run]:
    """The runs of the class-wise figures: neither figure 12's (constructed data) nor figure 13's."""
    from study.config.types import RunConfig

    return [r for r in runs if not (isinstance(r.run, RunConfig) and r.run.constructed) and not is_mitigation_run(r)]


def grouped(runs: Sequence[Run], key: Callable[[Run], Hashable]) -> dict:
    panels: dict = {}
    for run in runs:
        panels.setdefault(key(run), []).append(run)
    return panels


def one_setting(panels: dict) -> dict[tuple, list[str]]:
    """Run ids per panel, of one training setting: that of the panel's first planned run (the
    baseline's, as groups are planned in order); figure 6 compares the settings."""
    from study.run_directory import setting_tuple

    return {key: [r.run_id for r in runs if setting_tuple(r.run) == setting_tuple(runs[0].run)]
            for key, runs in panels.items()}


def dataset_model_method(run: Run, method: str | None = None) -> tuple[str, str, str]:
    return run.dataset, run.run.model, method or run.run.method


def evaluations_of(runs: Sequence[Run]) -> list[str]:
    """The evaluations of some runs, each once, in the order the runs list them."""
    return list(dict.fromkeys(e for r in runs for e in r.evaluations))


def _options(key: tuple, **more) -> dict:
    return {"dataset": key[0], "model": key[1], "method": key[2], **more}


def _by_id(runs: Sequence[Run], ids: Sequence[str]) -> list[Run]:
    index = {r.run_id: r for r in runs}
    return [index[i] for i in ids]


def classwise(runs: Sequence[Run], method: str | None = None, evaluations: bool = True) -> Panels:
    """Figures 1, 2 (one method; with the evaluations shown) and 7 (every method): one panel per
    (dataset, model, method)."""
    panels = one_setting(grouped(plain_runs(runs), dataset_model_method))
    out = {}
    for key, ids in panels.items():
        if method in (None, key[2]):
            shown = {"evaluations": evaluations_of(_by_id(runs, ids))} if evaluations else {}
            out[key] = (ids, _options(key, **shown, runs=ids))
    return out


def class_matrix(runs: Sequence[Run]) -> Panels:
    """Figures 9 and 10, per (dataset, model, method): drawn from the records of the panel's runs at
    their last checkpoint (a run that keeps only the checkpoint its paper's rule chose, as the TRIX
    recipe's do, has no such records)."""
    drawn = [r for r in plain_runs(runs) if "last" in r.checkpoints]
    return {key: (ids, {}) for key, ids in one_setting(grouped(drawn, dataset_model_method)).items()}


def discrepancy(runs: Sequence[Run], group: str, by: str) -> Panels:
    """Figures 4, 5, 6: every run of one experiment group, compared by dataset, model or setting."""
    members = [r for r in runs if group in r.groups]
    if not members:
        groups = sorted({g for r in runs for g in r.groups})
        raise ValueError(f"the discrepancy figure by {by} draws experiment group {group!r}, which the plan "
                         f"lacks; its groups: {', '.join(groups)}")
    ids = [r.run_id for r in members]
    return {(group,): (ids, {"by": by, "runs": ids, "evaluations": evaluations_of(members)})}


def rank_agreement(runs: Sequence[Run]) -> Panels:
    """Figure 8, per dataset with at least two configurations (model, method, setting) to compare
    under one threat model (clean, or a robust evaluation's norm): the figure ranks one threat model
    per matrix, so a dataset whose configurations share none would have nothing to draw."""
    from study.labels import eval_norm
    from study.run_directory import setting_tuple

    out = {}
    for dataset, members in grouped(plain_runs(runs), lambda r: r.dataset).items():
        evaluations = evaluations_of(members)
        under: dict[str | None, set] = {}
        for r in members:  # the evaluations the figure keeps of a run (fig04_06_discrepancy.with_roles)
            robust = next((e for e in evaluations if e in r.evaluations and e != "clean"), None)
            config = (*dataset_model_method(r), setting_tuple(r.run))
            for threat in ["clean"] * ("clean" in r.evaluations) + ([eval_norm(robust)] if robust else []):
                under.setdefault(threat, set()).add(config)
        if any(len(configs) > 1 for configs in under.values()):
            ids = [r.run_id for r in members]
            out[(dataset,)] = (ids, {"dataset": dataset, "runs": ids, "evaluations": evaluations})
    return out


def robustness(runs: Sequence[Run], method: str | None = None, of_method: str | None = None) -> Panels:
    """Figures 3, 11, 14 over the runs given (those of the robustness or corruption groups; only
    those trained with `of_method` if given), per (dataset, model, method); method "all" puts every
    method of a (dataset, model) in one panel."""
    runs = [r for r in runs if of_method in (None, r.run.method)]
    panels = one_setting(grouped(runs, lambda r: dataset_model_method(r, method)))
    return {key: (ids, _options(key, runs=ids)) for key, ids in panels.items()}


def mitigation(runs: Sequence[Run], controls: Callable[[list[str]], dict[str, str | None]] | None = None) -> Panels:
    """Figure 13: one panel per (dataset, model) with every method of the mitigation groups, in
    the order the groups list them; `controls` (methods -> each one's control among them, from the
    configuration the workflow planned with) is passed on to the figure as `method=control` words."""
    panels = grouped([r for r in runs if is_mitigation_run(r)], lambda r: dataset_model_method(r, "all"))
    out = {}
    for key, members in panels.items():
        methods = list(dict.fromkeys(r.run.method for r in members))
        more = {}
        if controls is not None:
            more["controls"] = [f"{m}={c}" for m, c in controls(methods).items() if c] or None
        out[key] = ([r.run_id for r in members], _options(key, methods=methods, **more))
    return out


def zoo(runs: Sequence[Run], robust: Mapping[str, str], reference: str | None = None) -> Panels:
    """Figures 15-17: per (dataset evaluated on, RobustBench threat model), the zoo runs with
    that threat model's robust evaluation (zoo.figure_evaluations); `reference` (figure 16) is
    the study's class-wise table, for our PGD-AT runs beside the zoo."""
    out = {}
    for (dataset, threat), members in grouped(runs, lambda r: (r.dataset, r.zoo.threat_model)).items():
        ev = robust.get(threat)
        ids = [r.run_id for r in members if ev in r.evaluations]
        if ids:
            extra = {"reference": reference} if reference else {}
            out[(dataset, threat)] = (ids, {"dataset": dataset, "threat_model": threat, "runs": ids,
                                            "evaluations": [ev], **extra})
    return out
