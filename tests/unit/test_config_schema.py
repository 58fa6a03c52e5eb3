"""workflow/schemas/params.schema.yaml is generated from the configuration's types
(study/config/types.py and the figure catalog, tools/params_schema.py); both front ends validate params against it."""

import jsonschema
import pytest
import yaml

from study.config import ConfigError, load_params
from tools.params_schema import SCHEMA_FILE, params_schema, schema_text


def test_committed_schema_is_the_generated_one(repo_root):
    committed = (repo_root / SCHEMA_FILE).read_text()
    assert committed == schema_text(), (
        "workflow/schemas/params.schema.yaml differs from the types: run `python -m tools.params_schema --write`")


def test_schema_is_valid_and_accepts_every_preset(repo_root):
    schema = params_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    for preset in ("ci", "demo", "paper"):
        params = load_params(repo_root / "params.yaml", {"preset": preset}, presets_dir=repo_root / "workflow/presets",
                             schema_path=repo_root / SCHEMA_FILE)
        assert not list(jsonschema.Draft202012Validator(schema).iter_errors(params.set_fields())), preset


def test_schema_rejects_what_the_types_reject(repo_root):
    """The schema is as strict as the types where Snakemake's users read it: an unknown key, a
    name outside a closed set, a bound, a group with both `dataset` and `datasets`."""
    schema = params_schema()
    validator = jsonschema.Draft202012Validator(schema)
    params = load_params(repo_root / "params.yaml", {"preset": "ci"}, presets_dir=repo_root / "workflow/presets",
                         schema_path=repo_root / SCHEMA_FILE).set_fields()
    bad = [
        ("train", {**params["train"], "epocs": 3}),
        ("train", {**params["train"], "schedule": {"name": "cosine"}}),
        ("evaluations", {**params["evaluations"], "pgd3": {**params["evaluations"]["pgd3"], "eps": -1}}),
        ("experiments", [{**params["experiments"][0], "datasets": ["synthetic"]}]),
        ("experiments", [{**params["experiments"][0], "kind": "fairness"}]),
    ]
    for key, value in bad:
        assert list(validator.iter_errors({**params, key: value})), (key, value)


def test_a_typo_is_one_line_naming_the_key_and_the_valid_ones(repo_root):
    with pytest.raises(ConfigError) as err:
        load_params(repo_root / "params.yaml", {"preset": "ci", "train": {"optimizer": {"momentun": 0.8}}},
                    presets_dir=repo_root / "workflow/presets", schema_path=repo_root / SCHEMA_FILE)
    message = str(err.value)
    assert "\n" not in message
    assert "train.optimizer.momentun: unknown key" in message
    assert "valid keys: betas, lr, momentum, name, nesterov, weight_decay" in message


def test_schema_is_yaml_a_reader_can_follow(repo_root):
    schema = yaml.safe_load((repo_root / SCHEMA_FILE).read_text())
    assert "$ref" not in (repo_root / SCHEMA_FILE).read_text()
    methods = schema["properties"]["methods"]["additionalProperties"]["properties"]
    assert methods["loss"]["properties"]["type"]["enum"] == ["ce", "trades", "mixed"]
    group = schema["properties"]["experiments"]["items"]
    assert group["properties"]["kind"]["enum"] == ["plain", "mitigation"]
