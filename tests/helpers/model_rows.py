"""A row of the model table (study.models.registry.MODELS) against the model it builds: the
parameter count (at 10 classes and 3 input channels) and the feature width the row states are
the built model's, and its forward GFLOPs at 32x32 within 30% of `count_flops` (a hand-rounded
cost), or the row is wrong."""

from __future__ import annotations

import torch

from study.models.registry import ModelSpec, build_model, count_flops

#: how far a row's forward GFLOPs may stray from the count (the price's rates are coarser)
GFLOPS_TOLERANCE = 0.3


def row_mismatches(spec: ModelSpec) -> list[str]:
    """What `spec` states that its built model contradicts (empty: the row is right). Built on
    the meta device: shapes only, so even WRN-28-10 is checked in milliseconds."""
    with torch.device("meta"):
        model = build_model(spec.name, 10, 3, 32)
        width = model.features(torch.zeros(1, 3, 32, 32)).shape[1]
        gflops = count_flops(model, (3, 32, 32)) / 1e9
    parameters = sum(p.numel() for p in model.parameters())
    found = {"parameters": parameters, "feature_dim (features' width)": width,
             "feature_dim (model.feature_dim)": model.feature_dim, "feature_dim (fc's input)": model.fc.in_features}
    stated = {"parameters": spec.parameters, "feature_dim (features' width)": spec.feature_dim,
              "feature_dim (model.feature_dim)": spec.feature_dim, "feature_dim (fc's input)": spec.feature_dim}
    wrong = [f"{spec.name}: the row states {key} {stated[key]}, the built model has {found[key]}"
             for key in found if found[key] != stated[key]]
    if abs(spec.gflops_32 - gflops) > GFLOPS_TOLERANCE * gflops:
        wrong.append(f"{spec.name}: the row states gflops_32 {spec.gflops_32}, count_flops gives {gflops:.4g}")
    return wrong
