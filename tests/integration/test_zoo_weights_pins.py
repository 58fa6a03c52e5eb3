"""The pinned checksums of zoo weights (study/models/zoo_checksums.py) through write_zoo_run, the
function `study zoo-run` calls (tests/workflow/test_zoo_weights_safety.py runs the command itself):
a pinned file whose hash differs is refused, a matching one is used unmarked, a bad table line is named."""

import pytest
import torch
from helpers.zoo import ENTRY, place_random_weights

from study.config.spec import ConfigSpec
from study.config.types import ZooEntry
from study.config.zoo import zoo_run_config
from study.data.download import file_checksums
from study.models.zoo_checksums import SITE_TABLE_ENV, ZooWeightsRefused
from study.run_directory import write_zoo_run

SPEC = ConfigSpec.parse(zoo_run_config(ZooEntry(dataset=ENTRY.dataset, threat_model=ENTRY.threat_model,
                                                name=ENTRY.name)))


def test_a_pinned_file_must_match_its_pin(tmp_path, monkeypatch, capsys):
    folder, run_dir = tmp_path / "weights", tmp_path / "run"
    _, path = place_random_weights(folder)
    digest = file_checksums(path, ["sha256"])["sha256"]
    table = tmp_path / "site.sha256"
    monkeypatch.setenv(SITE_TABLE_ENV, str(table))
    table.write_text(f"# this site's copies\n{'f' * 64}  {ENTRY.relative_file}\n")
    with pytest.raises(ZooWeightsRefused) as err:
        write_zoo_run(run_dir, SPEC, folder)
    assert f"{path} has sha256 {digest}, but {ENTRY.relative_file} is pinned to {'f' * 64}; the file was not used" \
        in str(err.value)
    assert not (run_dir / "model.pt").exists() and path.exists()

    table.write_text(f"{digest}  {ENTRY.relative_file}\n")
    write_zoo_run(run_dir, SPEC, folder)
    assert "unpinned" not in capsys.readouterr().err
    assert torch.load(run_dir / "model.pt", weights_only=True)["unpinned"] == []

    table.write_text("not a checksum line\n")
    with pytest.raises(ValueError, match=f"{table}:1: not a checksum line"):
        write_zoo_run(tmp_path / "run2", SPEC, folder)
