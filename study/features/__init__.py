"""Robust and non-robust feature datasets (Ilyas et al. 2019): construct, then build a prepared file."""

from study.features.build import build_constructed
from study.features.construct import KINDS, match_representation, relabel, relabel_targets

__all__ = ["KINDS", "build_constructed", "match_representation", "relabel", "relabel_targets"]
