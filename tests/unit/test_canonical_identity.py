"""A run's identity is its typed value's canonical form (study.config.spec.canonical): the fields
that were set, dumped with sorted keys and compact separators. Parsing what was written and
dumping it again gives the same bytes and key, whatever the keys' order or an integer written
where a float belongs."""

import json

import pytest

from study.config import ConfigSpec, EvaluationSpec, plan_runs, resolve_evaluation
from study.config.spec import run_key


@pytest.fixture
def ci_runs(ci_params):
    return plan_runs(ci_params)


def test_config_json_written_from_the_canonical_form_parses_back_to_the_same_bytes_and_key(ci_runs):
    for run in ci_runs:
        spec = run.spec
        again = ConfigSpec.parse(json.loads(spec.json))
        assert again.json == spec.json and again.key == spec.key and again.run_id == run.run_id


def test_the_key_does_not_depend_on_how_the_config_was_written(ci_runs):
    run = next(r for r in ci_runs if r.config["method"] == "trades_cfa")
    written = run.config
    assert isinstance(written["method_config"]["loss"]["beta"], float)  # typed: a float, however written
    as_int = {**written, "method_config": {**written["method_config"],
                                           "loss": {**written["method_config"]["loss"], "beta": 6}}}
    reordered = dict(reversed(list(as_int.items())))
    for raw in (as_int, reordered):
        assert run_key(raw) == run.spec.key and ConfigSpec.parse(raw).json == run.spec.json
    # a default written out is a field that was set: another run
    assert "threads" not in written
    assert run_key({**written, "threads": 1}) != run.spec.key


def test_a_key_of_a_config_that_does_not_parse_is_none(ci_runs):
    assert run_key({"dataset": "synthetic"}) is None and run_key([1]) is None


def test_an_evaluation_identity_parses_back_to_itself(ci_params):
    for name in ci_params.evaluations:
        job = EvaluationSpec.parse(resolve_evaluation(ci_params, name, dataset="synthetic"))
        for spec in (job, job.at("best", f"{name}@best")):
            assert EvaluationSpec.parse(json.loads(json.dumps(spec.identity))).identity == spec.identity
