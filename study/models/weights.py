"""The local weights folder of models trained elsewhere (the zoo: RobustBench's models,
torchvision's ImageNet models): the config key `zoo.weights_dir`, or $STUDY_WEIGHTS_DIR, or
else the project's own folder `<data.root>/zoo_weights` (DEFAULT_WEIGHTS_SUBDIR), the only one
the workflow downloads into. $STUDY_WEIGHTS_URL_BASE names a site's HTTP mirror in the same
layout that downloads come from instead of the public hosts (the tests' server on 127.0.0.1)."""

from __future__ import annotations

import os
from pathlib import Path

WEIGHTS_ENV = "STUDY_WEIGHTS_DIR"
WEIGHTS_CONFIG_KEY = "zoo.weights_dir"
WEIGHTS_URL_BASE_ENV = "STUDY_WEIGHTS_URL_BASE"
DEFAULT_WEIGHTS_SUBDIR = "zoo_weights"  # under data.root: git-ignored (/data/*), dvc-ignored (.dvcignore)


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
