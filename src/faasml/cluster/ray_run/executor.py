"""The real run's :class:`~faasml.cluster.executor.Executor`: jobs' workers as Ray actors.

``place`` restarts a job the way FaPES Table 2 does (finish the step in flight, checkpoint,
stop the workers, restore, start new ones on the new placement); while the driver's wall
clock passes (:class:`~faasml.cluster.ray_run.runner.RayClock`), :meth:`RayExecutor.pump`
and :meth:`RayExecutor.collect` keep one step of every placed job in flight; ``advance``
reads what the job did back into its :class:`JobState`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from faasml.cluster.executor import JobState, begin_interval
from faasml.cluster.plain import Cluster, Job, Placement
from faasml.cluster.ray_run.config import RunConfig
from faasml.cluster.ray_run.outcomes import Calibration, StepSample
from faasml.cluster.ray_run.wall import WallTime
from faasml.cluster.ray_run.workers import RealJob, TrainWorker
from faasml.exceptions import ConfigError


class RayExecutor:
    """Runs the training jobs of one real run (module docstring)."""

    def __init__(
        self,
        ray: Any,
        jobs: Sequence[Job],
        cluster: Cluster,
        config: RunConfig,
        workdir: Path,
        wall: WallTime,
    ) -> None:
        self.ray = ray
        self.cluster = cluster
        self.cfg = config
        self.workdir = workdir
        self.wall = wall
        self.train_cls = ray.remote(num_cpus=0)(TrainWorker)
        self.jobs = {
            j.name: RealJob(j, config.seed + i, config.steps, config.batch, workdir / f"{i}.pt")
            for i, j in enumerate(jobs)
        }

    # -- the Executor contract ----------------------------------------------------------
    def place(self, state: JobState, now: float) -> None:
        """Move the job's workers to ``state.placement`` (a checkpointed restart)."""
        rj = self.jobs[state.job.name]
        if rj.workers:
            self._stop(rj)
        self._launch(rj, state.placement)
        self._budget(rj)

    def advance(self, state: JobState, t0: float, dt: float) -> None:
        """Read back what the job did in ``[t0, t0 + dt)`` (it ran while the clock passed);
        a finished job's workers stop. Opens the job's step budget for the next round."""
        placed = begin_interval(state, t0, dt) is not None
        rj = self.jobs[state.job.name]
        state.progress = state.work * rj.outcome.steps / rj.work
        if rj.outcome.completion_s is not None and state.completion is None:
            state.completion = rj.outcome.completion_s
            self._retire(rj)
        if placed:
            end = t0 + dt
            state.running += (end if state.completion is None else state.completion) - t0
        self._budget(rj)

    # -- while the clock passes ---------------------------------------------------------
    def pump(self) -> None:
        """Put a step of every placed job in flight (within its round's budget)."""
        for rj in self.jobs.values():
            if rj.workers and rj.inflight is None and rj.outcome.steps < rj.limit:
                params = self.ray.put(rj.params())
                rj.inflight = [w.grad.remote(params, rj.outcome.steps) for w in rj.workers]

    def inflight(self) -> list[Any]:
        return [ref for rj in self.jobs.values() if rj.inflight for ref in rj.inflight]

    def collect(self) -> None:
        """Apply the steps whose every worker has answered."""
        for rj in self.jobs.values():
            if rj.inflight is not None:
                ready, _ = self.ray.wait(rj.inflight, num_returns=len(rj.inflight), timeout=0)
                if len(ready) == len(rj.inflight):
                    self._apply(rj, self.ray.get(rj.inflight))
                    rj.inflight = None

    def shut_down(self) -> None:
        """At the end of the clock: checkpoint and stop the jobs still running."""
        for rj in self.jobs.values():
            if rj.workers:
                self._stop(rj)

    # -- workers ------------------------------------------------------------------------
    def _budget(self, rj: RealJob) -> None:
        cap = self.cfg.steps_per_round
        rj.limit = min(rj.work, rj.outcome.steps + cap) if cap else rj.work

    def _launch(self, rj: RealJob, placement: Placement) -> None:
        rj.placement = placement
        rj.workers = [
            self.train_cls.options(resources={f"server{sid}": 1}).remote(
                rj.seed, rank, len(placement), rj.batch
            )
            for rank, sid in enumerate(placement)
        ]

    def _stop(self, rj: RealJob) -> None:
        """Finish the step in flight, checkpoint, stop the workers."""
        if rj.inflight is not None:
            self._apply(rj, self.ray.get(rj.inflight))
            rj.inflight = None
        rj.checkpoint()
        self._retire(rj)

    def _retire(self, rj: RealJob) -> None:
        for w in rj.workers:
            self.ray.kill(w)
        rj.workers, rj.placement = [], ()

    def _apply(self, rj: RealJob, results: list[tuple[list[Any], float]]) -> None:
        """Apply a step; the job completes when its last step is applied."""
        rj.apply(results)
        if rj.outcome.steps >= rj.work and rj.outcome.completion_s is None:
            rj.outcome.completion_s = self.wall.elapsed()

    # -- before the clock ---------------------------------------------------------------
    def calibrate(self, placements: Sequence[Placement], steps: int = 10) -> Calibration:
        """Measure, on this Ray cluster and through the run's own code, what the simulator
        needs to predict the run (:mod:`faasml.cluster.ray_predict`): one job walks through
        ``placements``; at each it is (re)started the way the run rescales (finish the step
        in flight, checkpoint, stop the workers, restore, start new ones), then takes
        ``steps`` timed steps. A (re)start's time is the time to its first step done, less
        one step at the new layout."""
        for placement in placements:
            if not placement or any(not 0 <= s < len(self.cluster.servers) for s in placement):
                raise ConfigError(
                    f"the calibration placement {placement} must name servers 0 to "
                    f"{len(self.cluster.servers) - 1}"
                )
            self.cluster.free({"calibration": placement})  # no server oversubscribed
        job = Job("calibration", "calibration", 0.0, 1, self.cfg.batch)
        rj = RealJob(job, self.cfg.seed, 1 << 30, self.cfg.batch, self.workdir / "cal.pt")
        samples: list[StepSample] = []
        restarts: list[float] = []
        try:
            for placement in placements:
                tic = time.monotonic()
                if rj.workers:
                    self._stop(rj)
                self._launch(rj, tuple(sorted(placement)))
                self._step(rj)  # waits for the new workers
                first = time.monotonic() - tic
                tic = time.monotonic()
                for _ in range(steps):
                    self._step(rj)
                step = (time.monotonic() - tic) / steps
                samples.append(StepSample(self.cluster.layout(placement), step))
                restarts.append(max(first - step, 0.0))
        finally:
            self._retire(rj)
        return Calibration(tuple(samples), tuple(restarts))

    def _step(self, rj: RealJob) -> None:
        """One synchronous step of a job (the run's step: parameters out, gradients back,
        averaged and applied by the driver)."""
        params = self.ray.put(rj.params())
        rj.apply(self.ray.get([w.grad.remote(params, rj.outcome.steps) for w in rj.workers]))
