"""Cluster mode: elastic training jobs on a shared pool of GPU servers (FaPES, Pollux).

Records (servers, jobs, placements), trace loaders, the goodput model, policies chosen by
name, and a trace-driven simulator on faasml's discrete-event core.
"""

from __future__ import annotations

from pathlib import Path

from faasml.cluster.executor import Executor, JobState, SimulatedExecutor
from faasml.cluster.goodput import AppModel, CommModel, TopologyCommModel, efficiency
from faasml.cluster.inference import (
    InferenceService,
    RateTrace,
    ServiceError,
    load_rate_csv,
    load_services,
    tidal_trace,
)
from faasml.cluster.loans import LOANING, LoanManager, select_reclaim
from faasml.cluster.metrics import JobRecord, SimResult, summarize
from faasml.cluster.policies import POLICIES, ClusterPolicy, make_policy
from faasml.cluster.records import (
    TABLE2_RESTART_S,
    Cluster,
    ClusterAllocation,
    Decision,
    Job,
    JobView,
    Layout,
    Placement,
    SchedulePlan,
    Server,
)
from faasml.cluster.simulator import SimConfig, Simulator, simulate
from faasml.cluster.traces import (
    TraceError,
    default_traces_dir,
    load_application,
    load_applications,
    load_workload,
    resolve_workload,
)


def load_models(traces: str | Path | None = None) -> dict[str, AppModel]:
    """A performance model per application under the traces directory."""
    base = None if traces is None else Path(traces)
    return {name: AppModel(trace) for name, trace in load_applications(base).items()}


__all__ = [
    "LOANING",
    "POLICIES",
    "TABLE2_RESTART_S",
    "AppModel",
    "Cluster",
    "ClusterAllocation",
    "ClusterPolicy",
    "CommModel",
    "Decision",
    "Executor",
    "InferenceService",
    "Job",
    "JobRecord",
    "JobState",
    "JobView",
    "Layout",
    "LoanManager",
    "Placement",
    "RateTrace",
    "SchedulePlan",
    "Server",
    "ServiceError",
    "SimConfig",
    "SimResult",
    "SimulatedExecutor",
    "Simulator",
    "TopologyCommModel",
    "TraceError",
    "default_traces_dir",
    "efficiency",
    "load_application",
    "load_applications",
    "load_models",
    "load_rate_csv",
    "load_services",
    "load_workload",
    "make_policy",
    "resolve_workload",
    "select_reclaim",
    "simulate",
    "summarize",
    "tidal_trace",
]
