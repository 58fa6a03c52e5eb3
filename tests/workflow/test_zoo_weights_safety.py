"""Zoo weights are read only with torch.load(weights_only=True) and checked against their pinned
sha256 (study/models/zoo_checksums.py): a planted pickle payload given as a zoo weights file is
refused in one line by `study zoo-run`, and again when a run's file is swapped for it later, even
with $TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD set; its code never runs, and no message names a way
around weights_only. A pinned file whose hash differs is refused, an unpinned one is marked."""

import json
import os

import pytest
import torch
from helpers.commands import run_study
from helpers.zoo import ENTRY, place_random_weights

from study.config.types import ZooEntry
from study.config.zoo import zoo_run_config
from study.models.zoo import load_zoo_model
from study.models.zoo_checksums import PROJECT_TABLE, SITE_TABLE_ENV, ZooWeightsRefused, read_table


class _Payload:
    """Unpickling it creates the marker file (what a planted checkpoint would do, harmlessly)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


def _plant(path, marker):
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"state_dict": _Payload(marker)}, path)


def _zoo_run(folder, run_dir, **env):
    config = json.dumps(zoo_run_config(ZooEntry(dataset=ENTRY.dataset, threat_model=ENTRY.threat_model,
                                                name=ENTRY.name)))
    base = {k: v for k, v in os.environ.items() if k != SITE_TABLE_ENV}
    full_env = {**base, "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD": "1", **env}
    return run_study("zoo-run", "--run-config", config, "--weights-dir", str(folder), "--run-dir", str(run_dir),
                     check=False, env=full_env)


def _error_line(proc) -> str:
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    return lines[0]


def test_a_planted_payload_is_refused_by_zoo_run_and_never_runs(tmp_path):
    folder, marker, run_dir = tmp_path / "weights", tmp_path / "PAYLOAD_RAN", tmp_path / "run"
    _plant(folder / ENTRY.relative_file, marker)
    line = _error_line(_zoo_run(folder, run_dir))
    assert line.startswith(f"study zoo-run: error: weights of RobustBench model Wong2020Fast (cifar10, Linf): "
                           f"{folder / ENTRY.relative_file} is not a plain weights file (torch's safe loader "
                           "(weights_only) refuses it: Unsupported global: GLOBAL io.open was not an allowed global")
    assert "delete it and fetch a good copy (robustbench.utils.load_model('Wong2020Fast'" in line
    assert "TORCH_FORCE" not in line and "weights_only=False" not in line and "weights_only` set to" not in line
    assert not marker.exists() and not (run_dir / "model.pt").exists() and not (run_dir / "config.json").exists()

    # the corrected folder (a good copy in place): the same command writes the run, marked unpinned
    (folder / ENTRY.relative_file).unlink()
    place_random_weights(folder)
    done = _zoo_run(folder, run_dir)
    assert done.returncode == 0, done.stderr
    assert "warning: weights of RobustBench model Wong2020Fast (cifar10, Linf)" in done.stderr
    assert "is unpinned" in done.stderr
    blob = torch.load(run_dir / "model.pt", weights_only=True)
    assert blob["unpinned"] == [ENTRY.relative_file]


def test_a_file_swapped_for_a_payload_after_zoo_run_is_refused_when_loaded(tmp_path, monkeypatch):
    """robustbench 1.1.1 calls torch.load without weights_only: the study hands it a weights_only load."""
    folder, marker = tmp_path / "weights", tmp_path / "PAYLOAD_RAN"
    _plant(folder / ENTRY.relative_file, marker)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    monkeypatch.delenv(SITE_TABLE_ENV, raising=False)
    with pytest.raises(ZooWeightsRefused, match="is not a plain weights file") as err:
        load_zoo_model(ENTRY, folder)
    assert "\n" not in str(err.value) and "TORCH_FORCE" not in str(err.value)
    assert not marker.exists()

    # the recorded hash: a good file changed since `study zoo-run` is refused, naming both hashes
    folder2 = tmp_path / "good"
    _, path = place_random_weights(folder2)
    with pytest.raises(ZooWeightsRefused, match="but `study zoo-run` recorded 0{64}: the file changed since"):
        load_zoo_model(ENTRY, folder2, expected={ENTRY.relative_file: "0" * 64})


def test_the_project_table_parses_and_no_advice_turns_weights_only_off():
    assert isinstance(read_table(PROJECT_TABLE), dict)
    root = PROJECT_TABLE.parents[2]
    for path in [*(root / "study").rglob("*.py"), *(root / "docs").rglob("*.md"), root / "README.md"]:
        text = path.read_text()
        assert "TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1" not in text and "weights_only=False" not in text, path
