"""faasml: ML training and tuning on serverless compute within a budget or a deadline."""

from __future__ import annotations

__version__ = "0.1.0"

_API = {"Tuner", "TuneConfig", "Result", "ResultGrid", "report"}


def __getattr__(name: str) -> object:
    """The Python API (``faasml.Tuner``, ``faasml.report``...), imported on first use."""
    if name in _API:
        from faasml import api

        return getattr(api, name)
    raise AttributeError(f"module 'faasml' has no attribute {name!r}")
