"""A Pollux-like goodput maximiser (Qiao et al., OSDI 2021), with an oracle goodput model."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from faasml.cluster.policies._base import ClusterPolicy, greedy_grow, place
from faasml.cluster.records import Cluster, ClusterAllocation, Decision, JobView


class PolluxPolicy(ClusterPolicy):
    """Every round, re-allocate all jobs to maximise the cluster fitness of Pollux §4.2: the
    generalised mean (p = −1) of each job's speedup (goodput over its best one-GPU goodput),
    with batch sizes co-adapted. Pollux searches with a genetic algorithm; this policy gives
    one GPU to each job (oldest first) and then grows greedily by the marginal fitness gain,
    which is what that objective rewards. A job whose allocation changes pays the restart
    overhead in the simulator."""

    name = "pollux"
    adaptive = True

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

        def inverse_speedup(base: float) -> Callable[[float], float]:
            # p = -1: the fitness sums -1/speedup, speedup = goodput / one-GPU goodput.
            return lambda g: -base / g if g > 0 else -1e30

        value = {v.name: inverse_speedup(float(curves[v.name][1])) for v in ordered}
        counts = greedy_grow(counts, curves, total - len(ordered), value, cluster.gpus_per_server)
        return Decision(place(counts, cluster, current))
