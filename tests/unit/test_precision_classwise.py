"""The bf16-against-fp32 class-wise comparison (tools.bench.precision_classwise): its rule,
checked by hand on small arrays."""

import math

import numpy as np
import pytest

from tools.bench.precision_classwise import (
    analyse,
    bonferroni_z,
    compare,
    pooled_spread,
    verdict_line,
    widened_spread,
)


def test_the_bonferroni_bound_over_the_classes():
    assert bonferroni_z(1) == pytest.approx(1.959964, abs=1e-5)
    assert bonferroni_z(10) == pytest.approx(2.807034, abs=1e-5)  # 1 - 0.05 / 20
    with pytest.raises(ValueError, match="classes must be >= 1, got 0"):
        bonferroni_z(0)


def test_a_class_differs_where_the_difference_exceeds_z_standard_errors():
    fp32 = np.array([[0.50, 0.30], [0.52, 0.32], [0.48, 0.28]])  # seeds x classes
    bf16 = np.array([[0.51, 0.20], [0.49, 0.22], [0.50, 0.18]])
    spread = pooled_spread(fp32, bf16)
    # by hand: class 0 variances 0.0004 and 0.0001 -> pooled sqrt((2*0.0004 + 2*0.0001) / 4)
    assert spread[0] == pytest.approx(math.sqrt(0.00025))
    assert spread[1] == pytest.approx(math.sqrt((2 * 0.0004 + 2 * 0.0004) / 4))
    result = compare(fp32, bf16, spread, ["cat", "dog"])
    se0 = math.sqrt(0.00025) * math.sqrt(2 / 3)
    assert result["classes"][0]["se"] == pytest.approx(se0)
    assert result["classes"][0]["difference"] == pytest.approx(0.0)
    assert result["classes"][1]["difference"] == pytest.approx(-0.10)
    # |-0.10| > 2.24 x 0.0163 (z of 2 classes) ; 0 is not
    assert result["differing"] == ["dog"] and result["worst_bf16"] == "dog"
    assert pooled_spread(fp32[:1], bf16) is None


def test_one_seed_borrows_the_spread_widened_for_its_fewer_images_and_the_verdict_follows():
    names = ["a", "b"]
    many_fp = np.array([[0.5, 0.5], [0.6, 0.4]])
    many_bf = np.array([[0.55, 0.45], [0.55, 0.45]])
    acc = {("big", "fp32", "clean"): many_fp, ("big", "bf16", "clean"): many_bf,
           ("big", "fp32", "pgd20"): many_fp, ("big", "bf16", "pgd20"): many_bf,
           ("small", "fp32", "clean"): np.array([[0.5, 0.5]]), ("small", "bf16", "clean"): np.array([[0.5, 0.5]]),
           ("small", "fp32", "pgd20"): np.array([[0.5, 0.5]]), ("small", "bf16", "pgd20"): np.array([[0.9, 0.5]])}
    images = {("big", m): np.array([400.0, 400.0]) for m in ("clean", "pgd20")}
    images |= {("small", m): np.array([100.0, 100.0]) for m in ("clean", "pgd20")}
    result = analyse(acc, images, names)
    small = result["presets"]["small"]
    assert small["spread_from"] == "big" and small["seeds"] == 1
    # by hand: big's spread for class a, sqrt((0.005 + 0) / 2) = 0.05; widened by 0.7 x 0.3 x (1/100 - 1/400)
    widened = math.sqrt(0.05 ** 2 + 0.7 * 0.3 * (1 / 100 - 1 / 400))
    assert small["metrics"]["pgd20"]["classes"][0]["seed_spread"] == pytest.approx(widened)
    assert widened_spread(np.array([0.05]), np.array([0.7]), np.array([400.0]), np.array([100.0]))[0] == \
        pytest.approx(widened)
    assert small["metrics"]["pgd20"]["differing"] == ["a"] and not small["metrics"]["clean"]["differing"]
    assert result["unchanged"] is False and verdict_line(result).endswith("small pgd20: a.")
    acc[("small", "bf16", "pgd20")] = np.array([[0.5, 0.5]])
    fine = analyse(acc, images, names)
    assert fine["unchanged"] is True and "does not change" in verdict_line(fine)
