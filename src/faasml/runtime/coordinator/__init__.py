"""The coordinator (SMLT §4.1 task scheduler): runs trials as groups of worker invocations
(``coordinator.Coordinator``), built from its parts: ``launcher`` (starting segments),
``commits`` (results), ``failures`` (restarts), ``billing`` (bills), ``partitions`` (data),
``stores`` (where workers synchronise) and ``state`` (options, the record of a segment)."""

from __future__ import annotations

from faasml.runtime.coordinator.coordinator import Coordinator
from faasml.runtime.coordinator.failures import LOST_STORE
from faasml.runtime.coordinator.launcher import WORKER_FN, WORKER_MODULE, Prewarm
from faasml.runtime.coordinator.state import (
    TIMINGS,
    BudgetExhaustedError,
    CoordinatorOptions,
    Segment,
)
from faasml.runtime.coordinator.trial import TrialFault, TrialState

__all__ = [
    "LOST_STORE",
    "TIMINGS",
    "WORKER_FN",
    "WORKER_MODULE",
    "BudgetExhaustedError",
    "Coordinator",
    "CoordinatorOptions",
    "Prewarm",
    "Segment",
    "TrialFault",
    "TrialState",
]
