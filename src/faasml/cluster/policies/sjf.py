"""Shortest job first without elasticity (FaPES §7.1 baseline)."""

from __future__ import annotations

from collections.abc import Sequence

from faasml.cluster.policies.fifo import FifoPolicy
from faasml.cluster.records import Cluster, JobView


class SjfPolicy(FifoPolicy):
    """Queued jobs start shortest first (predicted run time on the GPUs they asked for);
    a job that does not fit is skipped, not waited for."""

    name = "sjf"
    strict = False

    def order(self, waiting: Sequence[JobView], cluster: Cluster) -> list[JobView]:
        def length(view: JobView) -> float:
            rate = float(self.curve(view, cluster)[self.fixed_gpus(view, cluster)])
            return view.remaining / rate if rate > 0 else float("inf")

        return sorted(waiting, key=lambda v: (length(v), v.job.arrival_s, v.name))
