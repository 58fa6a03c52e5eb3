"""The cells of an experiment group's `grid` (the optimization group's optimizer x
schedule x weight-decay product)."""

from __future__ import annotations

from study.config.core import ConfigError, set_dotted
from study.config.types import ExperimentGroup


def grid_combinations(group: ExperimentGroup) -> list[dict]:
    """The train overrides of every cell of a group's `grid` (one empty override without a grid).

    `grid` maps dotted paths of the train section to lists of values, e.g.
    {optimizer: [{name: sgd, lr: 0.1}, {name: adam, lr: 0.001}], optimizer.weight_decay: [0, 5e-4]};
    every combination is one setting (Cartesian product, in the order the keys are written),
    applied over the group's `train`; a mapping value merges into the section at its path.
    """
    cells: list[dict] = [{}]
    for path, values in (group.grid or {}).items():
        if not isinstance(values, list) or not values:
            raise ConfigError(
                f"experiment group {group.group!r}: grid {path!r} needs a non-empty list of values, got {values!r}"
            )
        cells = [set_dotted(cell, path, v) for cell in cells for v in values]
    return cells
