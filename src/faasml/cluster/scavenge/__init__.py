"""Cluster mode II — MalleTrain: training on the idle nodes of a batch-scheduled cluster.

The idle-node trace and jobs loaders, the Resource Allocator (BFTrainer's MILP on node
counts, HiGHS), the Job Profiling Advisor (inverse-order online profiling), the policies
``malletrain``, ``freetrain`` (oracle), ``freetrain-guess``, ``greedy`` and ``equal``, an
executor contract with a simulated executor, and the event-driven simulator.
"""

from __future__ import annotations

from faasml.cluster.scavenge._records import (
    EventKind,
    IdleTrace,
    PoolChange,
    ScavengeJob,
    TraceFileError,
)
from faasml.cluster.scavenge.allocator import (
    AllocJob,
    CountAllocation,
    allocate_counts,
    candidate_values,
    map_to_nodes,
)
from faasml.cluster.scavenge.curves import (
    Curve,
    FittedCurve,
    LinearCurve,
    PiecewiseCurve,
    fit_curve,
    linear_guess,
)
from faasml.cluster.scavenge.executor import Executor, SimExecutor
from faasml.cluster.scavenge.jpa import (
    JobMonitor,
    ProfilingCost,
    inverse_order,
    schedule_cost,
    settled,
    step_up_order,
)
from faasml.cluster.scavenge.loaders import load_idle_trace, load_jobs
from faasml.cluster.scavenge.metrics import ScavengeResult
from faasml.cluster.scavenge.policies import (
    Decision,
    JobView,
    ScavengePolicy,
    make_scavenge_policy,
)
from faasml.cluster.scavenge.simulator import ScavengeConfig, ScavengeSimulator, simulate_scavenge

__all__ = [
    "AllocJob",
    "CountAllocation",
    "Curve",
    "Decision",
    "EventKind",
    "Executor",
    "FittedCurve",
    "IdleTrace",
    "JobMonitor",
    "JobView",
    "LinearCurve",
    "PiecewiseCurve",
    "PoolChange",
    "ProfilingCost",
    "ScavengeConfig",
    "ScavengeJob",
    "ScavengePolicy",
    "ScavengeResult",
    "ScavengeSimulator",
    "SimExecutor",
    "TraceFileError",
    "allocate_counts",
    "candidate_values",
    "fit_curve",
    "inverse_order",
    "linear_guess",
    "load_idle_trace",
    "load_jobs",
    "make_scavenge_policy",
    "map_to_nodes",
    "schedule_cost",
    "settled",
    "simulate_scavenge",
    "step_up_order",
]
