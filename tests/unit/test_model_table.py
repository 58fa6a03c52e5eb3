"""Each row of the model table states its model's size: the parameter count the price and the
memory request read, the feature width, and the forward GFLOPs the job's time is priced from;
each is the model's the row builds."""

import dataclasses

import pytest
from helpers.model_rows import row_mismatches

from study.models.registry import MODEL_NAMES, MODELS


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_each_row_states_its_models_parameters_feature_width_and_flops(name):
    assert row_mismatches(MODELS[name]) == []


def test_a_row_that_misstates_its_model_is_caught():
    row = MODELS["small_cnn"]
    wrong = dataclasses.replace(row, parameters=row.parameters + 1, feature_dim=64, gflops_32=0.03)
    assert row_mismatches(wrong) == [
        f"small_cnn: the row states parameters {row.parameters + 1}, the built model has {row.parameters}",
        "small_cnn: the row states feature_dim (features' width) 64, the built model has 128",
        "small_cnn: the row states feature_dim (model.feature_dim) 64, the built model has 128",
        "small_cnn: the row states feature_dim (fc's input) 64, the built model has 128",
        "small_cnn: the row states gflops_32 0.03, count_flops gives 0.02065",
    ]
    assert row_mismatches(dataclasses.replace(row, gflops_32=0.025)) == []  # within 30%
