"""Predict a real Ray run (``faasml cluster run``) with the cluster simulator.

The simulator replays the run's own inputs — the same jobs (arrivals compressed as the run
compresses them), cluster, policy, loaning strategy, services (their day compressed into
``day_s`` wall seconds) and round — with one change: jobs progress at the throughput of the
job the run really trains (a small data-parallel MLP whose driver is the parameter server),
not at their application's trace goodput. Policies still plan with the application models,
as they do in the run.

That throughput comes from a calibration on the run's own Ray cluster
(:meth:`faasml.cluster.ray_run.RayExecutor.calibrate`: step times on several layouts, and the
time of a restart — checkpoint, stop, start, restore), fitted to the simulator's form of a
step (FaPES §4.1, :mod:`faasml.cluster.goodput`): step = computation (one GPU) + a
communication term from :class:`~faasml.cluster.goodput.TopologyCommModel` (one server:
``intra0 + intra1·(r−1)``; several: ``inter0 + inter1·(nodes−1)``). Every step is one unit
of the run's work, so a job's progress rate on a layout is ``work / steps / step_s``.

:func:`compare` sets the prediction beside what the run measured: per job JCT, and the share
of requests served within the SLO.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from faasml.cluster.executor import JobState, begin_interval
from faasml.cluster.goodput import AppModel, TopologyCommModel
from faasml.cluster.inference import InferenceService
from faasml.cluster.metrics import SimResult
from faasml.cluster.plain import Cluster, Job, Layout, Placement
from faasml.cluster.policies import ClusterPolicy
from faasml.cluster.ray_run import Calibration, RunConfig, RunResult
from faasml.cluster.ray_run.config import compress_arrivals, compress_service
from faasml.cluster.simulator import SimConfig, Simulator
from faasml.exceptions import ConfigError

__all__ = [
    "Comparison",
    "JobComparison",
    "RunModel",
    "RunModelExecutor",
    "calibration_placements",
    "compare",
    "compress_arrivals",
    "compress_service",
    "fit_errors",
    "fit_run_model",
    "predict_run",
]


@dataclass(frozen=True)
class RunModel:
    """Step time of the run's job on any layout, and its restart time (fitted)."""

    compute_s: float
    """One step on one GPU."""
    comm: TopologyCommModel
    """What each layout adds to a step beyond ``compute_s``."""
    restart_s: float
    """A (re)start: checkpoint, stop, start, restore (the median measured)."""

    def step_s(self, layout: Layout) -> float:
        return self.compute_s + self.comm.sync_time(layout)


def fit_run_model(calibration: Calibration) -> RunModel:
    """Fit :class:`RunModel` to a calibration: ``compute_s`` is the median step on one GPU,
    the communication term a least-squares fit of the rest (``TopologyCommModel.fit_points``),
    the restart time the median of the restarts measured."""
    samples = calibration.steps
    if not any(s.layout.gpus == 1 for s in samples):
        raise ConfigError("a calibration needs a step time measured on one GPU")
    if not calibration.restarts_s:
        raise ConfigError("a calibration needs at least one restart time")
    for s in samples:
        if not (s.step_s > 0 and math.isfinite(s.step_s)):
            raise ConfigError(f"a calibration step time is {s.step_s}, but must be > 0")
    compute = float(np.median([s.step_s for s in samples if s.layout.gpus == 1]))
    nodes = np.array([s.layout.nodes for s in samples], dtype=np.float64)
    reps = np.array([s.layout.gpus for s in samples], dtype=np.float64)
    sync = np.array([s.step_s - compute for s in samples], dtype=np.float64)
    comm = TopologyCommModel.fit_points(nodes, reps, sync)
    return RunModel(compute, comm, float(np.median(calibration.restarts_s)))


def fit_errors(model: RunModel, calibration: Calibration) -> tuple[float, ...]:
    """Relative error of the fitted step time at each calibration point (how well the
    simulator's form fits the run's job)."""
    return tuple(model.step_s(s.layout) / s.step_s - 1.0 for s in calibration.steps)


def calibration_placements(cluster: Cluster) -> list[Placement]:
    """Placements to calibrate on: 1, 2, … GPUs packed on the fewest servers, then one GPU
    on each of 2, 3, … servers (the inter-server term). Consecutive placements differ, so
    each is reached by a real restart."""
    out: list[Placement] = []
    for gpus in range(1, cluster.total_gpus + 1):
        placement: list[int] = []
        for server in cluster.servers:
            placement += [server.id] * min(server.gpus, gpus - len(placement))
        out.append(tuple(placement))
    out += [tuple(range(n)) for n in range(2, len(cluster.servers) + 1)]
    return list(dict.fromkeys(out))


class RunModelExecutor:
    """The simulator's executor for a predicted run: a placed job takes steps of
    ``model.step_s(layout)`` after paying the restart overhead, at most
    ``steps_per_round`` a round (as the run caps them); ``steps`` steps are its work."""

    def __init__(
        self,
        cluster: Cluster,
        model: RunModel,
        steps: int,
        steps_per_round: int | None = None,
    ) -> None:
        self.cluster = cluster
        self.model = model
        self.steps = steps
        self.steps_per_round = steps_per_round

    def place(self, state: JobState, now: float) -> None:
        """Nothing to start: the driver accounts the fitted restart (``restart_s``)."""

    def advance(self, state: JobState, t0: float, dt: float) -> None:
        start = begin_interval(state, t0, dt)
        if start is None:
            return
        t, end = start, t0 + dt
        per_step = state.work / self.steps
        rate = per_step / self.model.step_s(self.cluster.layout(state.placement))
        limit = state.work
        if self.steps_per_round is not None:
            limit = min(limit, state.progress + self.steps_per_round * per_step)
        need = (limit - state.progress) / rate
        if t + need > end:
            state.progress += rate * max(end - t, 0.0)
        else:
            state.progress = limit
            if state.progress >= state.work - 1e-9 * max(state.work, 1.0):
                state.progress = state.work
                state.completion = t + need
        # As in the simulator: a finished job holds its GPUs until the round ends.
        state.running += (end if state.completion is None else state.completion) - t0


def predict_run(
    jobs: Sequence[Job],
    models: Mapping[str, AppModel],
    cluster: Cluster,
    policy: ClusterPolicy,
    config: RunConfig,
    services: Sequence[InferenceService],
    model: RunModel,
) -> SimResult:
    """Simulate the run of ``jobs`` (already on the run's clock) under ``config``: the
    policy, loans and services (sized by the run's forecast) as the run has them, jobs at
    the fitted ``model``'s throughput. ``policy`` must be a fresh instance (policies keep state)."""
    sim_config = SimConfig(
        round_s=config.round_s,
        restart_s=model.restart_s,
        seed=config.seed,
        max_time_s=config.max_time_s,
        loaning=config.loaning,
        forecast=config.forecast,
        forecast_window=config.forecast_window,
        headroom=config.headroom,
        inference_start_s=config.inference_start_s,
    )
    executor = RunModelExecutor(cluster, model, config.steps, config.steps_per_round)
    compressed = [compress_service(s, config.day_s) for s in services]
    return Simulator(jobs, models, cluster, policy, sim_config, compressed, executor).run()


@dataclass(frozen=True)
class JobComparison:
    """One job's JCT predicted and measured; with the time it held GPUs (restarts
    included), which separates a throughput error from a scheduling one."""

    name: str
    predicted_s: float | None
    measured_s: float | None
    predicted_running_s: float | None = None
    measured_running_s: float | None = None

    @property
    def error(self) -> float | None:
        """(predicted − measured) / measured."""
        if self.predicted_s is None or not self.measured_s:
            return None
        return (self.predicted_s - self.measured_s) / self.measured_s


@dataclass(frozen=True)
class Comparison:
    """A predicted run beside the measured one."""

    jobs: tuple[JobComparison, ...]
    avg_jct: JobComparison
    """Mean JCT over the jobs both completed (named ``mean``)."""
    slo_predicted: float | None
    slo_measured: float | None
    """Share of requests within the SLO (None without services)."""
    restarts_predicted: int
    restarts_measured: int
    rounds_predicted: int = 0
    rounds_measured: int = 0
    mean_round_measured_s: float | None = None
    """Mean time between the run's round starts (the simulator's are ``round_s``)."""

    @property
    def slo_error(self) -> float | None:
        if self.slo_predicted is None or not self.slo_measured:
            return None
        return (self.slo_predicted - self.slo_measured) / self.slo_measured


def compare(measured: RunResult, predicted: SimResult) -> Comparison:
    """Per job JCT, their mean, and SLO attainment (share of requests): predicted beside
    measured."""
    records = {r.name: r for r in predicted.jobs}
    rows = []
    for job in measured.jobs:
        record = records.get(job.name)
        rows.append(
            JobComparison(
                job.name,
                record.jct if record else None,
                job.jct,
                record.running_s if record else None,
                job.running_s,
            )
        )
    both = [r for r in rows if r.predicted_s is not None and r.measured_s is not None]
    mean = JobComparison(
        "mean",
        float(np.mean([r.predicted_s for r in both])) if both else None,
        float(np.mean([r.measured_s for r in both])) if both else None,
    )
    has_services = predicted.loans is not None
    s = measured.summary()
    return Comparison(
        tuple(rows),
        mean,
        float(predicted.loans["slo_requests"]) if predicted.loans is not None else None,
        float(s["slo_requests"]) if has_services else None,
        sum(r.restarts for r in predicted.jobs),
        sum(j.restarts for j in measured.jobs),
        len(predicted.utilization),
        len(measured.rounds_s),
        float(np.mean(np.diff(measured.rounds_s))) if len(measured.rounds_s) > 1 else None,
    )
