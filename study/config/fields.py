"""The building blocks of the configuration's types (study.config.types, and the evaluation kinds'
settings in study.config.evaluations): the base of every section, and the field types that
several sections share."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from study.checkpoints import CHECKPOINTS
from study.config.core import parse_fraction

Norm = Literal["linf", "l2"]
#: the checkpoints of study.checkpoints.CHECKPOINT_TABLE: `last` (model.pt), `best` on validation
#: (model_best.pt), `published`: best on the test subset by the published protocol (model_published.pt)
if TYPE_CHECKING:  # a Literal built from the table is one only at run time; statically, a name
    Checkpoint = str
else:
    Checkpoint = Literal[CHECKPOINTS]

_FRACTION_PATTERN = r"^\s*\d+(\.\d*)?\s*/\s*\d+(\.\d*)?\s*$"
#: a radius or step size: a number, or a fraction written as '8/255' (how papers give budgets)
Fraction = Annotated[
    float, Field(ge=0), BeforeValidator(parse_fraction),
    WithJsonSchema({"description": "a number, or a fraction written as a string such as '8/255'",
                    "oneOf": [{"type": "number", "minimum": 0}, {"type": "string", "pattern": _FRACTION_PATTERN}]}),
]
PositiveInt = Annotated[int, Field(ge=1)]
#: images per evaluation batch, or auto (large on a GPU; study.device.eval_batch_size)
EvalBatch = PositiveInt | Literal["auto"]


class Config(BaseModel):
    """A section of the configuration: immutable, and an unknown key is an error (a typo is
    never a silent default)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, allow_inf_nan=False)

    def set_fields(self) -> dict[str, Any]:
        """The fields that were set (a type's defaults left out), by their names as written, as
        JSON values: what a builder merges a partial override (a group's, a dataset's) over, and
        what is written out. Computed from the typed value, never kept beside it."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)
