"""faasml: ML training and tuning on serverless compute within a budget or a deadline.

Every name below is imported on first use (PEP 562): a function instance imports this package
before its worker module, and the planners behind ``plan_training`` and ``pareto_front`` pull in
scipy, over a second of every cold start on a busy machine that no function uses.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from faasml.api import (
        Result,
        ResultGrid,
        TorchTrainable,
        TuneConfig,
        Tuner,
        load_checkpoint,
        report,
    )
    from faasml.api_train import Trainer
    from faasml.catalog import Catalog, load_catalog
    from faasml.exceptions import ConfigError, FaasmlError, InfeasibleConstraintError
    from faasml.models import allocation_space
    from faasml.planners import pareto_front, plan_training
    from faasml.runtime.runs.events import RunCallback, RunEnd, RunStart, StageEnd, TrialResult
    from faasml.types import Allocation, Breakdown, Constraint, Objective, TrainPlan
    from faasml.workload import Workload, load_workload

from faasml._version import __version__

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
    "RunCallback",
    "RunEnd",
    "RunStart",
    "StageEnd",
    "TorchTrainable",
    "TrainPlan",
    "Trainer",
    "TrialResult",
    "TuneConfig",
    "Tuner",
    "Workload",
    "__version__",
    "allocation_space",
    "load_catalog",
    "load_checkpoint",
    "load_workload",
    "pareto_front",
    "plan_training",
    "report",
]

_MODULES = {
    "faasml.api": (
        "Tuner",
        "TuneConfig",
        "TorchTrainable",
        "Result",
        "ResultGrid",
        "load_checkpoint",
        "report",
    ),
    "faasml.api_train": ("Trainer",),
    "faasml.catalog": ("Catalog", "load_catalog"),
    "faasml.exceptions": ("ConfigError", "FaasmlError", "InfeasibleConstraintError"),
    "faasml.models": ("allocation_space",),
    "faasml.planners": ("pareto_front", "plan_training"),
    "faasml.runtime.runs.events": ("RunCallback", "RunEnd", "RunStart", "StageEnd", "TrialResult"),
    "faasml.types": ("Allocation", "Breakdown", "Constraint", "Objective", "TrainPlan"),
    "faasml.workload": ("Workload", "load_workload"),
}
_SUBPACKAGES = ("tracking",)
_WHERE = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str) -> object:
    """The public names, imported from their modules on first use."""
    if name in _SUBPACKAGES:  # faasml.tracking.MLflowCallback after a bare 'import faasml'
        return importlib.import_module(f"faasml.{name}")
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'faasml' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
