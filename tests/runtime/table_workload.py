"""A small workload with a table compute profile, shared by the runtime estimate tests."""

from __future__ import annotations

import dataclasses

from faasml.workload import ComputeProfile, Workload, load_workload

POINTS = ((128.0, 0.9), (1024.0, 0.2), (3538.0, 0.1))


def table_workload(points: tuple[tuple[float, float], ...] = POINTS) -> Workload:
    """lr-higgs on 20,000 samples (40 MB) whose seconds per sample at each memory size are
    ``points``."""
    return dataclasses.replace(
        load_workload("lr-higgs"),
        dataset_mb=40.0,
        samples=20_000,
        compute=ComputeProfile("table", points=points),
    )
