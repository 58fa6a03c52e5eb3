"""The local weights folder of models trained elsewhere (the zoo: RobustBench's models,
torchvision's ImageNet models): the config key `zoo.weights_dir`, or $STUDY_WEIGHTS_DIR."""

from __future__ import annotations

import os
from pathlib import Path

WEIGHTS_ENV = "STUDY_WEIGHTS_DIR"
WEIGHTS_CONFIG_KEY = "zoo.weights_dir"


class WeightsUnavailableError(FileNotFoundError):
    """The weights file of a model trained elsewhere is not in the weights folder."""


def resolve_weights_dir(weights_dir: str | os.PathLike | None) -> Path:
    if weights_dir is not None and str(weights_dir) != "":
        return Path(weights_dir).expanduser()
    from_env = os.environ.get(WEIGHTS_ENV, "")
    if not from_env:
        raise WeightsUnavailableError(
            f"no weights folder given: set the config key {WEIGHTS_CONFIG_KEY} or ${WEIGHTS_ENV}"
        )
    return Path(from_env).expanduser()
