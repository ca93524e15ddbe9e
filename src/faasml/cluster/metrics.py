"""Per-job records and the summary metrics of a cluster simulation (FaPES §7.3, Table 1)."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from faasml.exceptions import ConfigError


@dataclass(frozen=True)
class JobRecord:
    """What happened to one job."""

    name: str
    application: str
    arrival_s: float
    start_s: float | None
    completion_s: float | None
    queued_s: float
    """Time the job was active without GPUs (before its start and after preemptions)."""
    running_s: float
    goodput: float
    """Average useful samples per second while it held GPUs (throughput × efficiency)."""
    restarts: int
    gpu_s: float
    deadline_s: float | None = None
    speedup: float = 0.0
    """Average progress rate over the job's best one-GPU rate at its start: a goodput that
    compares across applications (raw goodput is dominated by the fastest application)."""
    progress: float = 0.0
    """Statistical progress reached (the work done; kept across preemptions)."""
    reclaim_preemptions: int = 0
    """Times the job was preempted because FaPES-Manager reclaimed a server it ran on."""

    @property
    def jct(self) -> float | None:
        return None if self.completion_s is None else self.completion_s - self.arrival_s

    @property
    def met_deadline(self) -> bool | None:
        if self.deadline_s is None:
            return None
        return self.completion_s is not None and self.completion_s <= self.deadline_s + 1e-9


@dataclass(frozen=True)
class SimResult:
    """The outcome of one simulated policy on one trace."""

    policy: str
    jobs: tuple[JobRecord, ...]
    utilization: tuple[tuple[float, float], ...]
    """(time, allocated GPUs / total GPUs) at every scheduling round."""
    sched_times_s: tuple[float, ...] = field(default=())
    """Wall time the policy took at every round (not part of the metrics)."""
    round_s: float | None = None
    """The round length. When set, a utilisation point stands for every round until the
    next point (the simulator skips idle rounds before an arrival and records one point)."""
    loans: dict[str, float] | None = None
    """With inference services: SLO attainment and FaPES-Manager's loans and reclaims."""

    def summary(self) -> dict[str, float]:
        return summarize(self)


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else math.nan


def _round_weights(result: SimResult) -> list[float]:
    """Rounds each utilisation point stands for: up to the next point, the last one 1."""
    if result.round_s is None or len(result.utilization) < 2:
        return [1.0] * len(result.utilization)
    times = [t for t, _ in result.utilization]
    gaps = [(b - a) / result.round_s for a, b in itertools.pairwise(times)]
    return [max(g, 1.0) for g in gaps] + [1.0]


def summarize(result: SimResult) -> dict[str, float]:
    """Average, p95 and max JCT, queuing time, goodput, utilisation, deadline satisfaction."""
    jcts = [j.jct for j in result.jobs if j.jct is not None]
    with_deadline = [j for j in result.jobs if j.deadline_s is not None]
    util = [u for _, u in result.utilization]
    weights = _round_weights(result)
    out = {
        "jobs": float(len(result.jobs)),
        "completed": float(len(jcts)),
        "avg_jct_s": float(np.mean(jcts)) if jcts else math.nan,
        "p95_jct_s": _percentile(jcts, 95),
        "max_jct_s": max(jcts) if jcts else math.nan,
        "avg_queue_s": float(np.mean([j.queued_s for j in result.jobs])),
        "p95_queue_s": _percentile([j.queued_s for j in result.jobs], 95),
        "avg_goodput": float(np.mean([j.goodput for j in result.jobs])),
        "avg_speedup": float(np.mean([j.speedup for j in result.jobs])),
        "avg_utilization": float(np.average(util, weights=weights)) if util else 0.0,
        "restarts": float(sum(j.restarts for j in result.jobs)),
        "makespan_s": max((j.completion_s or 0.0) for j in result.jobs) if result.jobs else 0.0,
        "deadline_met": (
            sum(bool(j.met_deadline) for j in with_deadline) / len(with_deadline)
            if with_deadline
            else math.nan
        ),
    }
    return out | dict(result.loans or {})


def write_json(path: Path, payload: dict[str, Any]) -> None:
    """Write JSON atomically (temporary file, then rename)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)


def json_safe(summary: dict[str, float]) -> dict[str, float | None]:
    """NaN (a metric with nothing to measure, e.g. no deadlines) becomes null."""
    return {k: (None if math.isnan(v) else v) for k, v in summary.items()}


def result_to_dict(result: SimResult) -> dict[str, Any]:
    """A result as plain JSON data: summary, per-job records, utilisation over time."""
    return {
        "policy": result.policy,
        "summary": json_safe(result.summary()),
        "jobs": [asdict(j) for j in result.jobs],
        "utilization": [list(u) for u in result.utilization],
    }


def load_metrics(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read metrics {path}: {err}") from None
    return data
