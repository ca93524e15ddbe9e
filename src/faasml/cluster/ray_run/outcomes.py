"""What a real run on Ray measured: per job, calibration samples, the whole run."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from faasml.cluster.plain import Layout


@dataclass
class JobOutcome:
    """What happened to one real job."""

    name: str
    arrival_s: float
    start_s: float | None = None
    completion_s: float | None = None
    steps: int = 0
    restarts: int = 0
    reclaim_preemptions: int = 0
    first_loss: float = math.nan
    last_loss: float = math.nan
    step_history: list[int] = field(default_factory=list)
    """Steps done at every restart (checkpoint): never falls."""
    running_s: float = 0.0
    """Wall time the job held workers (restarts included), as the simulator's running
    time: with its steps, the throughput it really had."""

    @property
    def jct(self) -> float | None:
        return None if self.completion_s is None else self.completion_s - self.arrival_s


@dataclass(frozen=True)
class StepSample:
    """A calibration measurement: the mean step time of a job on one layout."""

    layout: Layout
    step_s: float


@dataclass(frozen=True)
class Calibration:
    """What :meth:`RayRunner.calibrate` measured on the run's own Ray cluster: step times
    on layouts, and the time of every (re)start (stop, checkpoint, start, restore) beyond
    one step."""

    steps: tuple[StepSample, ...]
    restarts_s: tuple[float, ...]


@dataclass
class RunResult:
    policy: str
    jobs: list[JobOutcome]
    requests: int
    requests_ok: int
    latencies_ms: list[float]
    servers_loaned: int
    servers_reclaimed: int
    wall_s: float
    serving_slots: int = 0
    """Warm serving actors started (and answering) before the clock started."""
    calibration: Calibration | None = None
    """Step and restart times measured before the clock started (with ``calibrate``)."""
    rounds_s: list[float] = field(default_factory=list)
    """When each scheduling round started (a round starts ``round_s`` after the one before
    began, or later when the driver was still busy)."""
    forecast: str = "exact"
    """How the services were sized (``RunConfig.forecast``, ``forecast_window``,
    ``headroom``, ``inference_start_s``), recorded beside the SLO attainment measured."""
    forecast_window: int = 5
    headroom: float = 1.0
    inference_start_s: float = 0.0

    def summary(self) -> dict[str, float]:
        jcts = [j.jct for j in self.jobs if j.jct is not None]
        lat = self.latencies_ms
        return {
            "jobs": float(len(self.jobs)),
            "completed": float(len(jcts)),
            "avg_jct_s": float(np.mean(jcts)) if jcts else math.nan,
            "restarts": float(sum(j.restarts for j in self.jobs)),
            "reclaim_preemptions": float(sum(j.reclaim_preemptions for j in self.jobs)),
            "requests": float(self.requests),
            "slo_requests": self.requests_ok / self.requests if self.requests else 1.0,
            "p50_latency_ms": float(np.percentile(lat, 50)) if lat else math.nan,
            "p99_latency_ms": float(np.percentile(lat, 99)) if lat else math.nan,
            "servers_loaned": float(self.servers_loaned),
            "servers_reclaimed": float(self.servers_reclaimed),
            "serving_slots": float(self.serving_slots),
            "wall_s": self.wall_s,
        }
