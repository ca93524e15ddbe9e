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
from faasml.runtime.runs.inputs import stores_catalog
from faasml.runtime.runs.tune import TuneRun
from faasml.sim.platform import SimulatedPlatform
from faasml.sim.worker_model import SimulatedWorker
from faasml.types import Constraint

__all__ = ["simulated_tune_run"]


def simulated_tune_run(
    job: JobSpec,
    constraint: Constraint,
    run_dir: str | Path,
    *,
    noise: float = 0.1,
    cold_start_noise: float = 0.3,
    seed: int = 0,
    options: CoordinatorOptions | None = None,
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
    )
    # The job as the run sees it before it corrects anything: the truth the workers follow.
    worker = SimulatedWorker(run.workload, run.catalog, noise=noise, seed=seed)
    platform.functions[WORKER_FN] = worker
    return run
