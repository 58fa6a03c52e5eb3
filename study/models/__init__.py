"""Image classifiers that take [0, 1] pixels and normalize internally (see ``registry``)."""

from study.models.registry import MODEL_NAMES, ModelSpec, build_model, count_flops

__all__ = ["MODEL_NAMES", "ModelSpec", "Normalize", "build_model", "count_flops"]


def __getattr__(name: str):
    # Normalize imports torch; the registry's names do not (the plan reads them).
    if name == "Normalize":
        from study.models.normalize import Normalize

        return Normalize
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
