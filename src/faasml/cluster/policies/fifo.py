"""First-in-first-out without elasticity (FaPES §7.1 baseline)."""

from __future__ import annotations

from collections.abc import Sequence

from faasml.cluster.policies._base import ClusterPolicy, by_arrival, fit_in_order, place
from faasml.cluster.records import Cluster, ClusterAllocation, Decision, JobView


class FifoPolicy(ClusterPolicy):
    """Running jobs keep their GPUs; queued jobs start in arrival order with the GPUs and
    batch size they asked for, and the head of the queue blocks the rest."""

    name = "fifo"
    elastic = False
    strict = True

    def order(self, waiting: Sequence[JobView], cluster: Cluster) -> list[JobView]:
        return by_arrival(waiting)

    def allocate(
        self,
        jobs: Sequence[JobView],
        cluster: Cluster,
        current: ClusterAllocation,
        now: float,
    ) -> Decision:
        running = [v for v in jobs if current.get(v.name)]
        waiting = [v for v in jobs if not current.get(v.name)]
        used = sum(len(current[v.name]) for v in running)
        want = {v.name: self.fixed_gpus(v, cluster) for v in waiting}
        admitted = fit_in_order(
            self.order(waiting, cluster), want, cluster.total_gpus - used, strict=self.strict
        )
        counts = {v.name: len(current[v.name]) for v in running} | admitted
        return Decision(place(counts, cluster, current))
