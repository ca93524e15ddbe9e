"""A run of a job end to end: plan, run through the coordinator, record, resume.

The pieces live by responsibility: ``run_base`` (what every run shares: data, platform,
measured profile, meter, coordinator, record), ``tune_run`` (successive halving with live
re-calibration), ``train_run`` (adaptive training to a target loss); this module reopens an
interrupted run (``resume_run``) and keeps the names callers import.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from faasml.exceptions import ConfigError
from faasml.runtime.record.codec import record_to_json
from faasml.runtime.record.run_dir import RunDir
from faasml.runtime.runs.base import (
    DEFAULT_PROFILE,
    BaseRun,
    Progress,
    constraint_dict,
    constraint_from_dict,
    job_workload,
    stores_catalog,
)
from faasml.runtime.runs.job_guard import recorded_job
from faasml.runtime.runs.train import TrainRun
from faasml.runtime.runs.tune import TuneRun
from faasml.types import Constraint

__all__ = [
    "DEFAULT_PROFILE",
    "BaseRun",
    "Progress",
    "TrainRun",
    "TuneRun",
    "constraint_dict",
    "constraint_from_dict",
    "job_workload",
    "resume_run",
    "stores_catalog",
]


def resume_run(
    run_dir: str | Path,
    *,
    constraint: Constraint | None = None,
    ignore_job_file: bool = False,
    **kwargs: Any,
) -> BaseRun:
    """Reopen an interrupted run from its record; ``execute()`` continues it with the job it
    recorded (refused where its job file changed since, unless ``ignore_job_file``). A new
    ``constraint`` replaces the recorded one (e.g. a larger budget after a budget stop)."""
    folder = RunDir(run_dir)
    record = folder.read_record()
    if record.status in ("finished", "target-missed"):
        raise ConfigError(f"the run in {run_dir} has finished; nothing to resume")
    job = recorded_job(record_to_json(record), folder.path, ignore_job_file=ignore_job_file)
    if constraint is None:
        constraint = record.constraint
    else:
        record.constraint = constraint
    # The platform it ran on, which the command line may have chosen (--platform, --address).
    job = dataclasses.replace(job, platform=record.platform)
    kwargs.setdefault("platform_options", dict(record.platform_options))
    cls: type[BaseRun] = TuneRun if record.kind == "tune" else TrainRun
    if record.workflow is not None or (record.plan is None and job.search_workflow() is not None):
        from faasml.runtime.runs.workflow import WorkflowRun  # phases deployed by a search

        cls = WorkflowRun
    record.stop_reason = None  # the run goes on: a reason it stopped is history now
    record.trials = [  # stopped by the run, not finished
        dataclasses.replace(t, status="pending") if t.status in ("running", "stopped") else t
        for t in record.trials
    ]
    run = cls(job, constraint, run_dir, record=record, **kwargs)
    if record.plan is None:  # saved before its plan (refused, or stopped while planning)
        run.plan()  # afresh, from the profile the record holds (or a new measurement)
    elif record.profile is not None:
        run.measured()  # the profile (and calibration) the run was planned and corrected with
    return run
