"""Pareto pruning of the full AWS allocation space, per shipped workload (MISSION C3).

The space: memory 128-10240 MB in 64 MB steps x 1..1000 functions x every storage and scheme of
the aws-lambda catalog. Prints the space size, the time to evaluate it (the model, CE-scaling
eqs. 2-5), the time to prune it, and the size of the frontier. Median of 5 runs.

    .venv/bin/python benchmarks/bench_pareto.py
"""

from __future__ import annotations

import statistics
import time

from faasml.catalog import load_catalog
from faasml.models import Exclusions, allocation_space
from faasml.planners import pareto_indices
from faasml.workload import builtin_workloads, load_workload

REPEATS = 5


def main() -> None:
    catalog = load_catalog("aws-lambda")
    grid = len(catalog.platform.memory_sizes(64)) * 1000
    options = sum(len(s.schemes) for s in catalog.storages.values())
    print(
        f"AWS space: {len(catalog.platform.memory_sizes(64))} memory sizes x 1000 functions x "
        f"{len(catalog.storages)} storages ({options} storage/scheme pairs) = "
        f"{grid * options:,} allocations before feasibility rules"
    )
    header = (
        f"{'workload':<20}{'feasible':>11}{'evaluate':>11}{'prune':>9}{'total':>9}{'frontier':>10}"
    )
    print(header)
    print("-" * len(header))
    for name in builtin_workloads():
        workload = load_workload(name)
        evaluate_s, prune_s = [], []
        for _ in range(REPEATS):
            start = time.perf_counter()
            table = allocation_space(
                workload, catalog, memory_step_mb=64, max_functions=1000, exclusions=Exclusions()
            )
            middle = time.perf_counter()
            front = pareto_indices(table.time_s, table.cost_usd)
            end = time.perf_counter()
            evaluate_s.append(middle - start)
            prune_s.append(end - middle)
        ev, pr = statistics.median(evaluate_s), statistics.median(prune_s)
        print(
            f"{name:<20}{len(table):>11,}{ev * 1000:>9.0f}ms{pr * 1000:>7.0f}ms"
            f"{(ev + pr) * 1000:>7.0f}ms{len(front):>10}"
        )


if __name__ == "__main__":
    main()
