"""The result of a scavenging replay and its summary figures."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class ScavengeResult:
    """Everything a replay measured (see :meth:`summary` for the figures)."""

    policy: str
    end_s: float
    jobs: int
    started: int
    finished: int
    samples: float
    lost_samples: float
    jcts: list[float]
    idle_node_s: float
    used_node_s: float
    rescales: int
    preemptions: int
    paused_node_s: float
    solve_s: list[float]
    solver_status: dict[str, int] = field(default_factory=dict)
    profiled_jobs: int = 0
    profiling_s: float = 0.0
    profiling_rescales: int = 0
    timeline: list[tuple[float, int, int]] = field(default_factory=list)
    job_history: dict[str, list[tuple[float, int]]] = field(default_factory=dict)

    def summary(self) -> dict[str, float]:
        jct = np.asarray(self.jcts, dtype=np.float64)
        solve = np.asarray(self.solve_s, dtype=np.float64)
        nan = math.nan
        return {
            "samples": self.samples,
            "lost_samples": self.lost_samples,
            "jobs": float(self.jobs),
            "started": float(self.started),
            "finished": float(self.finished),
            "mean_jct_s": float(jct.mean()) if len(jct) else nan,
            "p95_jct_s": float(np.percentile(jct, 95)) if len(jct) else nan,
            "idle_node_h": self.idle_node_s / 3600.0,
            "used_node_h": self.used_node_s / 3600.0,
            "idle_used_share": self.used_node_s / self.idle_node_s if self.idle_node_s else nan,
            "rescales": float(self.rescales),
            "preemptions": float(self.preemptions),
            "paused_node_h": self.paused_node_s / 3600.0,
            "solve_mean_s": float(solve.mean()) if len(solve) else nan,
            "solve_p95_s": float(np.percentile(solve, 95)) if len(solve) else nan,
            "solve_max_s": float(solve.max()) if len(solve) else nan,
            "allocations": float(len(solve)),
            "profiled_jobs": float(self.profiled_jobs),
            "profiling_s": self.profiling_s,
            "profiling_rescales": float(self.profiling_rescales),
        }

    def to_dict(self, *, histories: int = 0) -> dict[str, Any]:
        """JSON-ready: the summary (NaN as null), solver statuses, and ``histories`` jobs'
        node counts over time."""
        summary = {
            k: (None if isinstance(v, float) and math.isnan(v) else v)
            for k, v in self.summary().items()
        }
        out: dict[str, Any] = {
            "policy": self.policy,
            "end_s": self.end_s,
            "summary": summary,
            "solver_status": dict(self.solver_status),
        }
        if histories:
            names = sorted(self.job_history)[:histories]
            out["job_history"] = {n: self.job_history[n] for n in names}
        return out
