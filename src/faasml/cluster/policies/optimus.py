"""Optimus (Peng et al., EuroSys 2018) as FaPES §7.1 runs it, with an oracle throughput model."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from faasml.cluster.policies._base import ClusterPolicy, greedy_grow, place
from faasml.cluster.records import Cluster, ClusterAllocation, Decision, JobView


class OptimusPolicy(ClusterPolicy):
    """Every round: one GPU to each job (oldest first) to avoid starvation, then GPUs one
    step at a time to the job whose remaining time falls most per GPU; packed placement.
    Jobs keep the batch size they asked for."""

    name = "optimus"

    def allocate(
        self,
        jobs: Sequence[JobView],
        cluster: Cluster,
        current: ClusterAllocation,
        now: float,
    ) -> Decision:
        total = cluster.total_gpus
        ordered = sorted(jobs, key=lambda v: (v.job.arrival_s, v.name))[:total]
        counts = {v.name: 1 for v in ordered}
        curves = {v.name: self.curve(v, cluster) for v in ordered}

        def remaining_time(view: JobView) -> Callable[[float], float]:
            # Value of a goodput: minus the remaining time it gives (Optimus's marginal gain).
            return lambda g: -view.remaining / g if g > 0 else -1e30

        value = {v.name: remaining_time(v) for v in ordered}
        counts = greedy_grow(counts, curves, total - len(ordered), value, cluster.gpus_per_server)
        return Decision(place(counts, cluster, current))
