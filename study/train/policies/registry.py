"""One table per policy kind: type name -> policy class.

Adding a policy is one class with a `from_config` classmethod and one entry in its kind's
table; `Registry.build` does the lookup and names the valid types when a name is unknown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from study.config.fields import Config


@dataclass(frozen=True)
class PolicyContext:
    """What a policy may need beyond its own config entry: the run's shape."""

    num_classes: int
    epochs: int = 1
    eps: float = 0.0                      # the adversary's radius (0 without an adversary)
    class_counts: torch.Tensor | None = None
    # How the loss reduces class-weighted terms over a batch; set from the weight policy
    # because FRL's reference divides by the batch's weight sum, not by the batch size.
    weight_normalization: str = "mean"


class Typed(Protocol):
    """A policy's settings (study.config.types: `EpsilonPolicy`, ...): each names its type."""

    @property
    def type(self) -> str: ...


@dataclass(frozen=True)
class Registry:
    """The policy types of one kind (`targets`, `epsilon`, ...) and the plain one."""

    kind: str
    default: str
    #: the settings' type (study.config.types: `EpsilonPolicy`, ...), which holds their defaults
    config: type[Config]
    types: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.default not in self.types:
            raise ValueError(f"{self.kind}: default type {self.default!r} is not among {', '.join(self.types)}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.types)

    def type_name(self, cfg: Typed | None) -> str:
        name = cfg.type if cfg is not None else self.default
        if name not in self.types:
            raise ValueError(f"unknown {self.kind} type {name!r}; valid: {', '.join(self.types)}")
        return name

    def build(self, cfg: Typed | None, ctx: PolicyContext) -> Any:
        """The policy that `cfg` (a method's entry such as {type: cfa, lambda: 0.5}, typed) names."""
        return self.types[self.type_name(cfg)].from_config(cfg if cfg is not None else self.config(), ctx)
