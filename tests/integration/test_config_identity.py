"""The configuration code resolves every preset exactly as it did when the pins were written
(tests/helpers/config_identity.py says how they are made): the same run ids, config.json files,
evaluation arguments, and the same records of a tiny ci run. A refactoring of study.config
must leave these unchanged; a deliberate change of a preset regenerates its pins."""

import json

import pytest
from helpers.config_identity import PINS, ROOT, plan_pins, record_pins

PINNED = json.loads(PINS.read_text())


@pytest.mark.parametrize("preset", sorted(PINNED["presets"]))
def test_every_run_of_the_preset_resolves_as_pinned(preset):
    got, want = plan_pins(ROOT, preset), PINNED["presets"][preset]
    assert sorted(got["runs"]) == sorted(want["runs"]), "run ids changed"
    for run_id, pinned in want["runs"].items():
        assert got["runs"][run_id] == pinned, run_id
    assert got["constructions"] == want["constructions"]


def test_ci_records_are_as_pinned():
    assert record_pins(ROOT) == PINNED["ci_records"]
