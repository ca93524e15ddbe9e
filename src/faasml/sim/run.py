"""A real ``TuneRun`` on the simulated platform: the run's own planning, budget guard,
re-calibration and record, with every function simulated on a virtual clock.

The run plans from the job's named profile (``profile:``; nothing is measured: a simulated
probe would only measure the model back), starts its segments through its coordinator on a
``SimulatedPlatform`` whose workers are ``SimulatedWorker``s of the job as the run sees it, and
takes its time from the platform's clock, so its record says what the run would have measured.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from faasml.catalog import load_catalog
from faasml.job import JobSpec
from faasml.runtime.coordinator import WORKER_FN, CoordinatorOptions
from faasml.runtime.record.records import Estimate, PlanRecord, RunRecord
from faasml.runtime.runs.events import RunCallback, StageEnd
from faasml.runtime.runs.inputs import stores_catalog
from faasml.runtime.runs.tune import TuneRun
from faasml.sim.platform import SimulatedPlatform
from faasml.sim.tuning import SimulatedStage
from faasml.sim.worker_model import SimulatedWorker
from faasml.types import Constraint

__all__ = ["TuneRunSimulation", "simulate_tune_job", "simulated_tune_run"]


def simulated_tune_run(
    job: JobSpec,
    constraint: Constraint,
    run_dir: str | Path,
    *,
    noise: float = 0.1,
    cold_start_noise: float = 0.3,
    seed: int = 0,
    options: CoordinatorOptions | None = None,
    callbacks: tuple[RunCallback, ...] = (),
) -> TuneRun:
    """``job``'s ``TuneRun`` within ``constraint`` on a simulated platform of its catalog;
    ``execute()`` runs it. ``noise`` and ``cold_start_noise`` are the coefficients of variation
    of each segment's time and each cold start; the same seed gives the same run."""
    # A simulated worker sends no heartbeat: it is never silent, however long it runs.
    base = options or CoordinatorOptions()
    options = dataclasses.replace(base, silent_after_s=math.inf, start_allowance_s=math.inf)
    catalog = stores_catalog(load_catalog(job.catalog), job.sync_stores())
    platform = SimulatedPlatform(catalog, {}, cold_start_noise=cold_start_noise, seed=seed)
    run = TuneRun(
        job,
        constraint,
        run_dir,
        measure=False,
        options=options,
        catalog=catalog,
        platform=platform,
        clock=platform.clock,
        callbacks=callbacks,
    )
    # The job as the run sees it before it corrects anything: the truth the workers follow.
    stores = job.sync_stores()  # name -> URL; None: the run's own embedded store
    default = next((name for name, url in stores.items() if url is None), next(iter(stores)))
    urls = {url: name for name, url in stores.items() if url is not None}
    worker = SimulatedWorker(
        run.workload, run.catalog, noise=noise, seed=seed, storage=default, stores=urls
    )
    platform.functions[WORKER_FN] = worker
    return run


@dataclasses.dataclass(frozen=True)
class TuneRunSimulation:
    """A simulated ``TuneRun`` beside its prediction: what each stage measured and what the
    run predicted for it before it started (``SimulatedStage``), and the run's record."""

    record: RunRecord
    stages: tuple[SimulatedStage, ...]
    seed: int
    noise: float
    cold_start_noise: float

    @property
    def plan(self) -> PlanRecord:
        assert self.record.plan is not None  # a run simulated has planned
        return self.record.plan

    @property
    def time_s(self) -> float:
        """The run's time on the virtual clock, from its first stage to its end."""
        return self.record.elapsed_s

    @property
    def cost_usd(self) -> float:
        return sum(charge.usd for charge in self.record.charges)

    @property
    def predicted(self) -> Estimate:
        """The run's prediction before it started: its plan's stages priced by the run's
        stage model (functions kept warm between stages), else the planner's figures."""
        plan = self.plan
        return plan.predicted or Estimate(plan.time_s, plan.cost_usd)

    @property
    def time_error(self) -> float:
        """(simulated − predicted) / predicted time."""
        return (self.time_s - self.predicted.time_s) / self.predicted.time_s

    @property
    def cost_error(self) -> float:
        return (self.cost_usd - self.predicted.cost_usd) / self.predicted.cost_usd

    @property
    def within_constraint(self) -> bool:
        return self.record.constraint.admits(self.time_s, self.cost_usd)


class _StagePeaks(RunCallback):
    """Takes the platform's peak of functions at each stage's end."""

    def __init__(self, platform: SimulatedPlatform) -> None:
        self.platform = platform
        self.peaks: list[int] = []

    def on_stage_end(self, event: StageEnd) -> None:
        self.peaks.append(self.platform.take_peak())


def simulate_tune_job(
    job: JobSpec,
    constraint: Constraint,
    run_dir: str | Path,
    *,
    planner: str = "exact",
    noise: float = 0.1,
    cold_start_noise: float = 0.3,
    seed: int = 0,
) -> TuneRunSimulation:
    """Plan ``job``'s tuning run with ``planner`` and run it on a simulated platform
    (``simulated_tune_run``) in ``run_dir``; its stages beside the planner's prediction."""
    run = simulated_tune_run(
        job, constraint, run_dir, noise=noise, cold_start_noise=cold_start_noise, seed=seed
    )
    platform = run.platform()
    assert isinstance(platform, SimulatedPlatform)  # the one simulated_tune_run gave it
    peaks = _StagePeaks(platform)
    run.events.callbacks.append(peaks)
    run.plan(planner)
    record = run.execute()
    assert record.plan is not None  # planned above
    stages = []
    for stage, peak in zip(record.plan.stages, peaks.peaks, strict=False):
        if stage.measured is None:
            break  # the run stopped before it (the budget guard)
        planned = Estimate(stage.time_s, stage.cost_usd)
        stages.append(
            SimulatedStage(
                index=stage.index,
                trials=stage.trials,
                time_s=stage.measured.time_s,
                cost_usd=stage.measured.cost_usd,
                predicted_time_s=(stage.predicted or planned).time_s,
                predicted_cost_usd=(stage.predicted or planned).cost_usd,
                peak_functions=peak,
            )
        )
    return TuneRunSimulation(record, tuple(stages), seed, noise, cold_start_noise)
