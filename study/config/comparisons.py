"""Declared comparisons: every pair of methods that figure 13 or the reproduction report
compares (a method and the method it is compared with, study.config.methods.present_baseline)
names what differs between its two arms (`differs_in` in the method's params entry), and
`comparison_differences` finds what does differ, from the two run configs as the plan builds
them for the group that runs them. A group may declare further pairs (`compare`: a method of
the group against a control of the group or, `control_group`, of another group's runs); those
are the only pairs of runs of two groups the report forms.

A path is a policy (`adversary`, `targets`, `epsilon`, `loss`, `weights`, `averaging`,
`regularizer`), one of its fields (`adversary.bn_stats`), or a run-level key: `init_from`,
`validation_attack`, `train.<setting>` (`train.epochs`, `train.optimizer.lr`). A declared path
covers the paths under it.

    study comparisons            the per-preset list docs/methods.md shows
    study comparisons --write    rewrite that list in docs/methods.md
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

from study.config.core import ConfigError
from study.config.grid import grid_combinations
from study.config.methods import POLICIES
from study.config.pairs import compared_pairs, find_group, group_baseline
from study.config.params import available_presets, load_params
from study.config.plan import run_config
from study.config.types import ExperimentGroup, Method, OptimizerSettings, Params, ScheduleSettings
from study.io import atomic_write_text, replace_marked

#: run config key -> the declared path it is reported under
_RUN_KEYS = {"epochs": "train.epochs", "batch_size": "train.batch_size", "train_per_class": "train.train_per_class",
             "optimizer": "train.optimizer", "schedule": "train.schedule", "augment": "train.augment",
             "validation": "train.validation", "selection": "train.selection", "precision": "train.precision",
             "tf32": "train.tf32", "init_from": "init_from", "init_checkpoint": "init_from"}
#: the same by construction in a group's runs, or a name: never a difference of the method
_IDENTITY = ("method", "dataset", "data_variant", "model", "seed", "synthetic", "constructed")
#: the settings each schedule reads: a key left behind by a preset's merge from another
#: schedule (a constant schedule's `milestones`) changes nothing in the run
_SCHEDULE_READS = {"step": ("milestones", "gamma"), "cyclic": ("peak",), "constant": ()}

DOC = Path("docs/methods.md")
START, END = "<!-- declared comparisons: start -->", "<!-- declared comparisons: end -->"


@dataclass(frozen=True)
class Comparison:
    """One compared pair of one experiment group: what its method declares and what differs."""

    group: str
    method: str
    baseline: str
    declared: tuple[str, ...]
    actual: frozenset[str]
    #: the group whose runs of `baseline` are the control (the method's own group but for a
    #: cross-group pair a group declares)
    control_group: str = ""

    def __post_init__(self) -> None:
        if not self.control_group:
            object.__setattr__(self, "control_group", self.group)

    @property
    def cross_group(self) -> bool:
        return self.control_group != self.group

    @property
    def name(self) -> str:
        """The pair in the report's words: `group: method vs control` (the control's group where another)."""
        control = f"{self.control_group}'s {self.baseline}" if self.cross_group else self.baseline
        return f"{self.group}: {self.method} vs {control}"

    @property
    def undeclared(self) -> list[str]:
        """Differences no declared path covers."""
        return sorted(p for p in self.actual if not any(covers(d, p) for d in self.declared))

    @property
    def unfounded(self) -> list[str]:
        """Declared paths under which nothing differs."""
        return [d for d in self.declared if not any(covers(d, p) for p in self.actual)]


def covers(declared: str, path: str) -> bool:
    return path == declared or path.startswith(declared + ".")


def comparison_differences(params: Params, method: str, group: str | None = None,
                           baseline: str | None = None) -> set[str]:
    """The paths where the runs of `method` and of the method it is compared with differ, both
    built as the plan builds them for `group` (default: the first group that runs both), over
    the group's datasets and grid cells."""
    candidates = [find_group(params, group)] if group is not None else params.experiments
    for typed in candidates:
        if method not in typed.methods:
            continue
        other = baseline or group_baseline(params, typed, method)
        if other is not None:
            return _differences(params, typed, method, other)
    where = f"group {group!r}" if group is not None else "any experiment group"
    raise ConfigError(f"method {method!r}: no method it is compared with runs in {where}")


def _differences(params: Params, group: ExperimentGroup, method: str, baseline: str,
                 control_group: ExperimentGroup | None = None) -> set[str]:
    found: set[str] = set()
    control_group = control_group or group
    model, seed = group.models[0], group.seeds[0]
    for dataset in group.dataset_names:
        for cell in grid_combinations(group):
            arms = [run_config(params, group, model, method, seed, dataset=dataset, cell=cell),
                    run_config(params, control_group, model, baseline, seed, dataset=dataset,
                               cell=cell if control_group is group else {})]
            if not all("validation" in cfg for cfg in arms):
                # a run without a split has no checkpoint rule: the split's difference says it
                arms = [{k: v for k, v in cfg.items() if k != "selection"} for cfg in arms]
            ours, theirs = (_comparable(cfg) for cfg in arms)
            found |= _diff(ours, theirs)
    return found


def _comparable(cfg: Mapping) -> dict:
    """A run config under the declared paths, each setting typed (a default written out is no
    difference) and a missing policy as its type's default."""
    out: dict[str, Any] = {}
    method = Method.model_validate(cfg["method_config"]).model_dump(by_alias=True)
    for policy in POLICIES:
        value = method[policy]
        if value is None and policy != "adversary":
            kind = next(t for t in get_args(Method.model_fields[policy].annotation) if t is not type(None))
            value = kind().model_dump(by_alias=True)
        out[policy] = value
    train: dict[str, Any] = {}
    for key, value in cfg.items():
        if key in _IDENTITY or key in ("method_config", "epoch_eval"):
            continue
        if key == "optimizer":
            value = OptimizerSettings.model_validate(value).model_dump()
        elif key == "schedule":
            typed = ScheduleSettings.model_validate(value)
            value = {"name": typed.name, **{k: getattr(typed, k) for k in _SCHEDULE_READS[typed.name]}}
        target = _RUN_KEYS.get(key, f"train.{key}")
        if target.startswith("train."):
            train[target.split(".", 1)[1]] = value
        else:
            out.setdefault(target, {})[key] = value
    epoch_eval = dict(cfg.get("epoch_eval") or {})
    out["validation_attack"] = epoch_eval.pop("validation_attack", None)
    train["epoch_eval"] = epoch_eval
    out["train"] = train
    return out


def _diff(a: Any, b: Any, path: str = "") -> set[str]:
    if a == b:
        return set()
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        # another type of policy (or schedule, optimizer) is a difference of the whole
        kind = next((k for k in ("type", "name") if k in a and k in b), None)
        if path and kind is not None and a[kind] != b[kind]:
            return {path}
        found: set[str] = set()
        for key in sorted(set(a) | set(b), key=str):
            found |= _diff(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
        return found
    return {path}


def comparisons(params: Params) -> list[Comparison]:
    """Every compared pair of every experiment group (study.config.pairs.compared_pairs: the
    methods whose comparison baseline the group runs, then the pairs it declares), each with its
    declared and actual differences."""
    return [Comparison(p.group.group, p.method, p.baseline, p.declared,
                       frozenset(_differences(params, p.group, p.method, p.baseline, p.control_group)),
                       p.control_group.group)
            for p in compared_pairs(params)]


def preset_params(preset: str | None, params_path: Path | str = "params.yaml",
                  presets_dir: Path | str = "workflow/presets") -> Params:
    """params.yaml with a preset's overlay, or bare (preset None: no overlay)."""
    return load_params(params_path, {"preset": preset}, presets_dir=presets_dir)


def comparisons_markdown(params_path: Path | str = "params.yaml",
                         presets_dir: Path | str = "workflow/presets") -> str:
    """The declared pairs of every preset, as docs/methods.md lists them."""
    lines = ["| preset | group | method | compared with | declared difference |", "|---|---|---|---|---|"]
    for preset in available_presets(Path(presets_dir)):
        for c in comparisons(preset_params(preset, params_path, presets_dir)):
            control = f"`{c.baseline}` ({c.control_group})" if c.cross_group else f"`{c.baseline}`"
            lines.append(f"| {preset} | {c.group} | `{c.method}` | {control} | "
                         f"{', '.join(f'`{d}`' for d in c.declared)} |")
    return "\n".join(lines) + "\n"


def rewrite_section(text: str, section: str) -> str:
    """`text` with the part between the markers replaced by `section`."""
    if START not in text or END not in text:
        raise ConfigError(f"{DOC} has no {START} ... {END} markers")
    return replace_marked(text, START, END, section)


def rewrite_doc(doc: Path, section: str) -> Path:
    """Rewrite the marked list in the file `doc` (docs/methods.md) with `section`."""
    atomic_write_text(doc, rewrite_section(doc.read_text(), section))
    return doc
