"""The ci preset at 32 px with placed zoo weights (`zoo_project`, a module fixture registered by
tests/conftest.py): the zoo's DAG and its jobs run in it."""

import pytest
import yaml

from helpers.workflow import copy_project
from helpers.zoo import place_random_weights

#: The ci preset with 32 px synthetic images: RobustBench's CIFAR architectures take no other size.
PRESET = "ci32"


@pytest.fixture(scope="module")
def zoo_project(tmp_path_factory):
    """(a copy of the project with the ci32 preset, a folder of random zoo weights)."""
    project = copy_project(tmp_path_factory.mktemp("project"))
    presets = project / "workflow" / "presets"
    overlay = yaml.safe_load((presets / "ci.yaml").read_text())
    overlay["data"]["synthetic"]["image_size"] = 32
    (presets / f"{PRESET}.yaml").write_text(yaml.safe_dump(overlay))
    weights = tmp_path_factory.mktemp("weights")
    place_random_weights(weights)
    return project, weights
