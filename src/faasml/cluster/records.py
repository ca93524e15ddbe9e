"""What policies see and answer each round: job views, decisions, allocation checks.

The plain records (servers, clusters, jobs, layouts, plans) live in the leaf module
:mod:`faasml.cluster.plain` and are re-exported here, so ``faasml.cluster.records`` keeps
every name it had.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from faasml.cluster.goodput import AppModel
from faasml.cluster.plain import (
    TABLE2_RESTART_S,
    Cluster,
    ClusterAllocation,
    Job,
    Layout,
    Observation,
    Placement,
    SchedulePlan,
    Segment,
    Server,
    packed_layout,
)
from faasml.exceptions import ConfigError


@dataclass(frozen=True)
class JobView:
    """What a policy sees of one active (arrived, unfinished) job at a scheduling round."""

    job: Job
    model: AppModel
    """The job's performance model (goodput for any layout and batch size)."""
    progress: float
    """Statistical progress so far (iterations at the initial batch size, Pollux)."""
    work: float
    """Progress at which the job completes."""
    placement: Placement = ()
    attained_gpu_s: float = 0.0
    restarts: int = 0
    waiting_rounds: int = 0
    """Consecutive rounds spent without GPUs since the job arrived or was preempted."""
    started: bool = False
    plan: SchedulePlan | None = None
    observed: tuple[Observation, ...] = ()
    """Throughput the job measured on the layouts it ran on (for policies that learn)."""

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def remaining(self) -> float:
        return max(self.work - self.progress, 0.0)

    @property
    def max_gpus(self) -> int:
        """Most GPUs the job can use: its own bound and its batch-size bound."""
        return self.model.max_gpus(self.job)


@dataclass(frozen=True)
class Decision:
    """A policy's answer: the allocation, and schedule plans for policies that keep them."""

    allocation: dict[str, Placement]
    plans: dict[str, SchedulePlan] = field(default_factory=dict)


def check_allocation(
    allocation: ClusterAllocation, cluster: Cluster, jobs: Sequence[JobView]
) -> None:
    """Raise ConfigError if an allocation names unknown jobs or oversubscribes a server."""
    names = {view.name for view in jobs}
    for name, placement in allocation.items():
        if name not in names:
            raise ConfigError(f"the allocation names job {name!r}, which is not active")
        if list(placement) != sorted(placement):
            raise ConfigError(f"the placement of job {name!r} is not sorted: {placement}")
        for sid in placement:
            if not 0 <= sid < len(cluster.servers):
                raise ConfigError(f"job {name!r} is placed on server {sid}, which does not exist")
    cluster.free(allocation)


__all__ = [
    "TABLE2_RESTART_S",
    "Cluster",
    "ClusterAllocation",
    "Decision",
    "Job",
    "JobView",
    "Layout",
    "Observation",
    "Placement",
    "SchedulePlan",
    "Segment",
    "Server",
    "check_allocation",
    "packed_layout",
]
