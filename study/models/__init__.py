"""Image classifiers that take [0, 1] pixels and normalize internally (see ``registry``)."""

from study.models.normalize import Normalize
from study.models.registry import MODEL_NAMES, ModelSpec, build_model, count_flops

__all__ = ["MODEL_NAMES", "ModelSpec", "Normalize", "build_model", "count_flops"]
