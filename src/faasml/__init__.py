"""faasml: ML training and tuning on serverless compute within a budget or a deadline."""

from __future__ import annotations

from faasml.catalog import Catalog, load_catalog
from faasml.exceptions import (
    ConfigError,
    FaasmlError,
    InfeasibleConstraintError,
)
from faasml.models import allocation_space
from faasml.planners import pareto_front, plan_training
from faasml.types import Allocation, Breakdown, Constraint, Objective, TrainPlan
from faasml.workload import Workload, load_workload

__version__ = "0.1.0"

__all__ = [
    "Allocation",
    "Breakdown",
    "Catalog",
    "ConfigError",
    "Constraint",
    "FaasmlError",
    "InfeasibleConstraintError",
    "Objective",
    "Result",
    "ResultGrid",
    "TorchTrainable",
    "TrainPlan",
    "TuneConfig",
    "Tuner",
    "Workload",
    "__version__",
    "allocation_space",
    "load_catalog",
    "load_workload",
    "pareto_front",
    "plan_training",
    "report",
]

_API = {"Tuner", "TuneConfig", "TorchTrainable", "Result", "ResultGrid", "report"}


def __getattr__(name: str) -> object:
    """The Python API (``faasml.Tuner``, ``faasml.report``...), imported on first use."""
    if name in _API:
        from faasml import api

        return getattr(api, name)
    raise AttributeError(f"module 'faasml' has no attribute {name!r}")
