"""A run config and an evaluation are parsed once, where they enter (study.config.spec):
derived evaluation names are typed copies,
and a config.json written by training parses back to the same run id."""

import json

import pytest

from study.config import ConfigSpec, EvaluationSpec, plan_runs, resolve_evaluation
from study.record_names import record_name
from study.run_directory import read_run_config
from study.train.engine import train_run


@pytest.fixture
def planned(ci_params):
    return next(r for r in plan_runs(ci_params) if r.config["method"] == "pgd_at")


def test_the_identity_is_the_canonical_form_of_the_typed_value(planned):
    spec = planned.spec
    assert spec.identity == spec.config.model_dump(mode="json", exclude_unset=True, by_alias=True)
    assert spec.json == json.dumps(spec.identity, sort_keys=True, separators=(",", ":")) + "\n"
    assert spec.run_id == planned.run_id and planned.run_id.endswith(f"-{spec.key}")
    # the identity is a new dict each time: editing one changes no spec
    edited = spec.identity
    edited["epochs"] = 3
    assert spec.identity["epochs"] != 3 and ConfigSpec.parse(edited).run_id != spec.run_id


def test_a_bad_run_config_is_one_line_at_the_boundary(planned):
    bad = {**planned.config, "optimizer": {**planned.config["optimizer"], "weight_decey": 0.1}}
    with pytest.raises(ValueError, match=r"^run config: optimizer.weight_decey: unknown key") as err:
        ConfigSpec.parse(bad)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="model: 'nope' is not one of"):
        ConfigSpec.parse({**planned.config, "model": "nope"})


def test_derived_evaluation_names_are_typed_copies(ci_params):
    raw = resolve_evaluation(ci_params, "pgd3")
    job = EvaluationSpec.parse(raw)
    best = job.at("best", record_name("pgd3", "best"))
    assert (best.name, best.config.checkpoint) == ("pgd3@best", "best")
    assert isinstance(best.config, type(job.config))
    # the job it came from is unchanged, as is the mapping it was parsed from
    assert (job.name, job.config.checkpoint) == ("pgd3", "last")
    assert job.identity == EvaluationSpec.parse(raw).identity and "checkpoint" not in job.identity
    assert "checkpoint" not in raw and raw["name"] == "pgd3"
    # the record keeps the job's canonical form, its name and checkpoint set
    assert best.identity == {**job.identity, "name": "pgd3@best", "checkpoint": "best"}
    assert job.at("published", record_name("pgd3", "published")).name == "pgd3@published"


def test_config_json_of_a_training_run_parses_back_to_its_run_id(tmp_path, synthetic_splits, tiny_run_config):
    cfg = {**tiny_run_config, "epochs": 1}
    spec = ConfigSpec.parse(cfg)
    train_run(cfg, synthetic_splits, tmp_path / "run", device="cpu", progress=False)
    back = read_run_config(tmp_path / "run")
    assert back.run_id == spec.run_id and back.key == spec.key
    assert back.identity == spec.identity and back.config == spec.config
    assert (tmp_path / "run/config.json").read_text() == spec.json
