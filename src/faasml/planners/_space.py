"""The allocation space Θ a planner searches, or an error naming why it is empty."""

from __future__ import annotations

from faasml.catalog import Catalog
from faasml.exceptions import ConfigError
from faasml.models.space import AllocationTable, Exclusions, allocation_space
from faasml.workload import Workload


def searchable_space(
    workload: Workload,
    catalog: Catalog,
    *,
    memory_step_mb: int | None = None,
    max_functions: int | None = None,
) -> AllocationTable:
    """Θ of ``workload`` on ``catalog`` (``allocation_space``, CE-scaling eqs. 1–5); raises
    ConfigError with the counted reasons when no allocation can run the workload."""
    exclusions = Exclusions()
    space = allocation_space(
        workload,
        catalog,
        memory_step_mb=memory_step_mb,
        max_functions=max_functions,
        exclusions=exclusions,
    )
    if len(space) == 0:
        reasons = "; ".join(f"{k} ({v})" for k, v in exclusions.counts.most_common())
        raise ConfigError(f"no allocation of {catalog.name} can run {workload.name}: {reasons}")
    return space
