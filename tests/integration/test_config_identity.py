"""The configuration code resolves every preset exactly as it did when the pins were written
(tests/data/run_ids.txt, one line per run; tests/helpers/config_identity.py says how they are
made): the same run ids, config.json files, evaluation arguments, and the same records of a tiny
ci run. A refactoring of study.config must leave these unchanged; a deliberate change of a preset
regenerates its pins."""

import pytest
from helpers.config_identity import PRESETS, ROOT, plan_lines, read_pins, record_lines

PINNED = read_pins()


@pytest.mark.parametrize("preset", PRESETS)
def test_every_run_of_the_preset_resolves_as_pinned(preset):
    got, want = plan_lines(ROOT, preset), PINNED.get(preset, [])
    assert want, f"tests/data/run_ids.txt pins no run of preset {preset}"
    # the lines that differ, each run's whole pin on one line
    assert sorted(set(got) - set(want)) == sorted(set(want) - set(got)) == []


def test_ci_records_are_as_pinned():
    assert record_lines(ROOT) == PINNED["records"]
