"""params.yaml carries no comment (`dvc exp run -S` rewrites it: a comment beside a value it
changed would no longer be true); its annotated copy, workflow/published-settings.yaml, holds
each setting's source. The two hold the same values, so that no annotation describes a value
params.yaml does not have."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_the_annotated_copy_holds_params_yaml_values():
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    annotated = yaml.safe_load((ROOT / "workflow/published-settings.yaml").read_text())
    assert params == annotated, sorted(k for k in params.keys() | annotated.keys()
                                       if params.get(k) != annotated.get(k))


def test_params_yaml_has_no_comment_beside_a_value():
    for number, line in enumerate((ROOT / "params.yaml").read_text().splitlines(), 1):
        assert line.startswith("#") or "#" not in line, f"params.yaml:{number}: {line}"
    body = [line for line in (ROOT / "params.yaml").read_text().splitlines() if line and not line.startswith("#")]
    assert body and not any(line.lstrip().startswith("#") for line in body)
