"""Allocations of the cluster-style baseline ``fixed-pool`` (CE-scaling §IV-B, "Fixed").

The paper's cluster-based method "divides resources equally among stages and across trials in
each stage": every stage gets the same pool of N functions of m MB on one storage, and a stage
of q_i trials gives each trial n_i = max(1, ⌊N / q_i⌋) of them. Early stages crowd many trials
on one function each; late stages spread few trials over many functions (and pay for the
synchronisation). This module evaluates the allocations those plans need.
"""

from __future__ import annotations

import numpy as np

from faasml.catalog import Catalog
from faasml.models.space import DEFAULT_MEMORY_STEP_MB, AllocationTable, evaluate
from faasml.planners.tuning._job import TuningJob
from faasml.workload import Workload


def pool_sizes(top: int) -> list[int]:
    """N = 1, 2, 4, … up to ``top``, and ``top`` itself."""
    sizes = [1 << p for p in range(top.bit_length()) if 1 << p <= top]
    return sorted({*sizes, top})


def pool_plans(
    workload: Workload,
    catalog: Catalog,
    job: TuningJob,
    *,
    memory_step_mb: int | None = None,
    max_functions: int | None = None,
) -> tuple[AllocationTable, tuple[tuple[int, ...], ...]]:
    """The allocations every pool plan needs, and each plan as one row per stage."""
    platform = catalog.platform
    memories = platform.memory_sizes(
        memory_step_mb or max(platform.memory_step_mb, DEFAULT_MEMORY_STEP_MB)
    )
    top = max_functions or int(platform.max_concurrent(memories).max())
    pools = pool_sizes(top)
    per_trial = np.array(
        [[max(1, n // q) for q in job.trial_counts] for n in pools], dtype=np.int64
    )
    counts = np.unique(per_trial)
    options = [(s, scheme) for s, svc in catalog.storages.items() for scheme in svc.schemes]
    parts: list[AllocationTable] = []
    plans: list[tuple[int, ...]] = []
    offset = 0
    for storage, scheme in options:
        grid_n, grid_m = np.meshgrid(counts, memories, indexing="ij")
        part = evaluate(workload, catalog, grid_n, grid_m, storage, scheme)
        lookup = {
            (int(n), int(m)): offset + i
            for i, (n, m) in enumerate(zip(part.n, part.memory_mb, strict=True))
        }
        for memory in memories:
            for stage_counts in per_trial:
                rows = [lookup.get((int(n), int(memory))) for n in stage_counts]
                if all(row is not None for row in rows):
                    plans.append(tuple(int(row) for row in rows if row is not None))
        parts.append(part)
        offset += len(part)
    table = AllocationTable.concatenate(parts, parts[0].options)
    return table, tuple(dict.fromkeys(plans))
