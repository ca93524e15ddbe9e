"""A real run: the cluster driver (:class:`~faasml.cluster.simulator.Simulator`) with the Ray
executor, the serving slots and a wall clock that keeps both working while it passes."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from faasml.cluster.goodput import AppModel
from faasml.cluster.inference import InferenceService
from faasml.cluster.loans import LoanManager, reserve_servers
from faasml.cluster.metrics import SimResult
from faasml.cluster.plain import Cluster, Job, Placement
from faasml.cluster.policies import ClusterPolicy
from faasml.cluster.ray_run.config import RunConfig, compress_service
from faasml.cluster.ray_run.executor import RayExecutor
from faasml.cluster.ray_run.outcomes import Calibration, RunResult
from faasml.cluster.ray_run.serving import RayServing
from faasml.cluster.ray_run.wall import WallTime
from faasml.cluster.sim_config import SimConfig
from faasml.cluster.simulator import Simulator


class RayClock:
    """The driver's clock in a real run: wall seconds since the run began. Passing time is
    the real work of the run: until the next event every placed job keeps one step in flight
    and the services' requests are sent when due (one thread, ``ray.wait``). An event runs
    at its time or, when the driver was busy, as soon as it is free."""

    def __init__(
        self, ray: Any, wall: WallTime, executor: RayExecutor, serving: RayServing | None
    ) -> None:
        self.ray = ray
        self.wall = wall
        self.executor = executor
        self.serving = serving
        self._now = 0.0

    def now(self) -> float:
        return self._now

    def advance_to(self, when: float) -> None:
        if when > self._now:
            self._work_until(when)
            self._now = max(when, self.wall.elapsed())

    def _work_until(self, end: float) -> None:
        """Keep the jobs stepping and the requests going until wall time ``end`` (and until
        the requests due by then that were held for a starting slot are sent)."""
        executor, serving = self.executor, self.serving
        if serving is not None:
            serving.plan_until(end)
        while True:
            now = self.wall.elapsed()
            executor.pump()
            due = None
            if serving is not None:
                serving.send_due(now)
                due = serving.next_due()
            if now >= end and (due is None or due > end):
                break
            refs = executor.inflight() + (serving.inflight() if serving is not None else [])
            wait = max(min(end, end if due is None else due) - now, 0.0)
            if refs:
                self.ray.wait(refs, num_returns=1, timeout=wait)
            else:
                time.sleep(wait)
            executor.collect()
            if serving is not None:
                serving.drain()


class RayRunner:
    """Drives one real run (the package docstring); use :func:`run_on_ray`."""

    def __init__(
        self,
        ray: Any,
        jobs: Sequence[Job],
        models: Mapping[str, AppModel],
        cluster: Cluster,
        policy: ClusterPolicy,
        config: RunConfig,
        services: Sequence[InferenceService],
        workdir: Path,
    ) -> None:
        self.ray = ray
        self.jobs = list(jobs)
        self.models = models
        self.cluster = cluster
        self.policy = policy
        self.cfg = config
        self.services = list(services)
        self.wall = WallTime()
        self.executor = RayExecutor(ray, self.jobs, cluster, config, workdir, self.wall)
        self.serving = (
            RayServing(ray, self.services, cluster, config, self.wall) if self.services else None
        )

    def calibrate(self, placements: Sequence[Placement], steps: int = 10) -> Calibration:
        """Step and restart times on ``placements`` (:meth:`RayExecutor.calibrate`)."""
        return self.executor.calibrate(placements, steps)

    def run(self, calibrate: Sequence[Placement] = ()) -> RunResult:
        """Warm the serving slots, calibrate on ``calibrate`` (if any), then run the jobs
        and services on the clock: the driver's rounds (arrivals, inference and loans, the
        policy, restart accounting) are the simulator's."""
        cfg = self.cfg
        # The services' traces on the run's clock (a day in ``day_s`` wall seconds).
        compressed = [compress_service(s, cfg.day_s) for s in self.services]
        sim_config = SimConfig(
            round_s=cfg.round_s,
            restart_s=0.0,  # restarts really happen (at ``place``): nothing to model
            seed=cfg.seed,
            max_time_s=cfg.max_time_s,
            loaning=cfg.loaning,
            forecast=cfg.forecast,
            forecast_window=cfg.forecast_window,
            headroom=cfg.headroom,
            inference_start_s=cfg.inference_start_s,
        )
        if self.serving is not None:
            reserve = reserve_servers(compressed, cfg.round_s, self.cluster.gpus_per_server)
            self.serving.warm_up(LoanManager(self.cluster, reserve, cfg.loaning))
        calibration = self.calibrate(calibrate) if calibrate else None
        clock = RayClock(self.ray, self.wall, self.executor, self.serving)
        driver = Simulator(
            self.jobs,
            self.models,
            self.cluster,
            self.policy,
            sim_config,
            compressed,
            self.executor,
            clock=clock,
            serving=self.serving,
        )
        self.wall.start()
        try:
            result = driver.run()
        finally:
            self.executor.shut_down()
            if self.serving is not None:
                self.serving.shut_down()
        return self._result(result, calibration)

    def _result(self, result: SimResult, calibration: Calibration | None) -> RunResult:
        """The run's outcome: each job's steps and losses with the driver's accounting (start,
        completion, restarts, preemptions, time placed), with the sizing settings."""
        cfg, serving = self.cfg, self.serving
        outcomes = []
        for record in result.jobs:
            outcome = self.executor.jobs[record.name].outcome
            outcome.start_s = record.start_s
            outcome.restarts = record.restarts
            outcome.reclaim_preemptions = record.reclaim_preemptions
            outcome.running_s = record.running_s
            outcomes.append(outcome)
        loans = result.loans or {}
        return RunResult(
            self.policy.name,
            outcomes,
            serving.sent if serving else 0,
            serving.ok if serving else 0,
            serving.latencies if serving else [],
            int(loans.get("servers_loaned", 0)),
            int(loans.get("servers_reclaimed", 0)),
            self.wall.elapsed(),
            sum(len(actors) for actors in serving.slots.values()) if serving else 0,
            calibration,
            [t for t, _ in result.utilization],
            cfg.forecast,
            cfg.forecast_window,
            cfg.headroom,
            cfg.inference_start_s,
        )
