"""A fixed machine for the planner tests that price contention and warm functions."""

from __future__ import annotations

import dataclasses
from functools import cache

from faasml.catalog import Catalog, load_catalog
from faasml.planners.tuning import SuccessiveHalving
from faasml.workload import Workload, load_workload

SHA = SuccessiveHalving(8, 2, 3, 2)


@cache
def machine(delivered: float | None) -> Catalog:
    """The local catalog on a fixed 4-core machine (not this one's), delivering ``delivered``
    vCPUs (None: every function its share)."""
    base = load_catalog("local")
    platform = dataclasses.replace(
        base.platform, capacity_vcpus=4.0, capacity_memory_mb=16000.0, delivered_vcpus=delivered
    )
    return dataclasses.replace(base, platform=platform)


@cache
def workload() -> Workload:
    return load_workload("mobilenet-cifar10")
