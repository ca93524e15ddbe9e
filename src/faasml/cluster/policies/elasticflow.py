"""ElasticFlow (Gu et al., ASPLOS 2023) as FaPES §7.1 runs it, with an oracle throughput model."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from faasml.cluster.policies._base import ClusterPolicy, FloatArray, by_arrival, grow_and_place
from faasml.cluster.records import Cluster, ClusterAllocation, Decision, JobView


def minimum_share(curve: FloatArray, remaining: float, time_left: float) -> int | None:
    """Fewest GPUs that finish ``remaining`` progress within ``time_left`` (ElasticFlow's
    minimum satisfactory share), or None when no count does."""
    if time_left <= 0:
        return None
    need = remaining / time_left
    ok = np.flatnonzero(curve[1:] >= need)
    return int(ok[0]) + 1 if len(ok) else None


class ElasticFlowPolicy(ClusterPolicy):
    """Admission control, then minimum satisfactory shares, then greedy growth.

    A queued job is admitted (earliest deadline first, then arrival) only when its demand
    fits beside the shares of the jobs already admitted: a deadline job's demand is its
    minimum satisfactory share, a job without a deadline (or whose deadline no share can
    meet) asks for the GPUs it requested (FaPES §7.1). Admitted jobs — the ones that have
    started — keep at least their minimum share (one GPU without a deadline); the GPUs left
    go greedily to the largest marginal gain in normalised throughput; packed placement.
    Jobs keep the batch size they asked for. Jobs are never dropped: one whose deadline
    cannot be met runs best-effort and counts as a miss.
    """

    name = "elasticflow"

    def allocate(
        self,
        jobs: Sequence[JobView],
        cluster: Cluster,
        current: ClusterAllocation,
        now: float,
    ) -> Decision:
        total = cluster.total_gpus
        curves = {v.name: self.curve(v, cluster) for v in jobs}
        margin = self.round_s

        def share(view: JobView) -> int | None:
            if view.job.deadline_s is None:
                return None
            return minimum_share(
                curves[view.name], view.remaining, view.job.deadline_s - now - margin
            )

        counts: dict[str, int] = {}
        used = 0
        for view in by_arrival(jobs):
            if view.started:
                n = share(view) or 1
                counts[view.name] = min(n, max(total - used, 0))
                used += counts[view.name]
        counts = {k: v for k, v in counts.items() if v > 0}

        def priority(view: JobView) -> tuple[float, float, str]:
            deadline = view.job.deadline_s if view.job.deadline_s is not None else float("inf")
            return (deadline, view.job.arrival_s, view.name)

        for view in sorted((v for v in jobs if not v.started), key=priority):
            demand = share(view) or self.fixed_gpus(view, cluster)
            if used + demand <= total:
                counts[view.name] = demand
                used += demand

        def normalised(base: float) -> Callable[[float], float]:
            return lambda g: g / base if base > 0 else 0.0

        value = {name: normalised(float(curves[name][1])) for name in counts}
        admitted = {n: curves[n] for n in counts}
        return grow_and_place(counts, admitted, total - used, value, cluster, current)
