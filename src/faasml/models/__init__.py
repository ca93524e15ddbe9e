"""Pure, vectorised performance and cost models (MISSION C2)."""

from faasml.models.cost import epoch_cost, startup_cost
from faasml.models.perf import EpochTime, epoch_time, invocations_per_epoch
from faasml.models.space import AllocationTable, Exclusions, allocation_space, evaluate
from faasml.models.sync import SyncRequests, sync_requests, sync_time

__all__ = [
    "AllocationTable",
    "EpochTime",
    "Exclusions",
    "SyncRequests",
    "allocation_space",
    "epoch_cost",
    "epoch_time",
    "evaluate",
    "invocations_per_epoch",
    "startup_cost",
    "sync_requests",
    "sync_time",
]
