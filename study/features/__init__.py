"""Robust / non-robust feature datasets (Ilyas et al. 2019): D_R, D_NR, D_rand, D_det."""

from study.features.build import build_constructed, settings_key
from study.features.construct import KINDS, match_representation, relabel, relabel_targets

__all__ = ["KINDS", "build_constructed", "match_representation", "relabel", "relabel_targets", "settings_key"]
