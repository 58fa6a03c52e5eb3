"""Each row of the model table states its model's size: the parameter count the price and the
memory request read, and the feature width; both equal the model the row builds."""

import dataclasses

import pytest
from helpers.model_rows import row_mismatches

from study.models.registry import MODEL_NAMES, MODELS


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_each_row_states_its_models_parameters_and_feature_width(name):
    assert row_mismatches(MODELS[name]) == []


def test_a_row_that_misstates_its_model_is_caught():
    row = MODELS["small_cnn"]
    wrong = dataclasses.replace(row, parameters=row.parameters + 1, feature_dim=64)
    assert row_mismatches(wrong) == [
        f"small_cnn: the row states parameters {row.parameters + 1}, the built model has {row.parameters}",
        "small_cnn: the row states feature_dim (features' width) 64, the built model has 128",
        "small_cnn: the row states feature_dim (model.feature_dim) 64, the built model has 128",
        "small_cnn: the row states feature_dim (fc's input) 64, the built model has 128",
    ]
