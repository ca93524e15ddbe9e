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
from faasml.runtime.job_guard import recorded_job
from faasml.runtime.run_base import (
    DEFAULT_PROFILE,
    BaseRun,
    Progress,
    constraint_dict,
    constraint_from_dict,
    job_workload,
    stores_catalog,
)
from faasml.runtime.run_dir import RunDir
from faasml.runtime.train_run import TrainRun
from faasml.runtime.tune_run import TuneRun
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
    state = folder.read_record()
    if state.get("status") in ("finished", "target-missed"):
        raise ConfigError(f"the run in {run_dir} has finished; nothing to resume")
    job = recorded_job(state, folder.path, ignore_job_file=ignore_job_file)
    if constraint is None:
        constraint = constraint_from_dict(state["constraint"])
    else:
        state["constraint"] = constraint_dict(constraint)
    # The platform it ran on, which the command line may have chosen (--platform, --address).
    job = dataclasses.replace(job, platform=state.get("platform", job.platform))
    kwargs.setdefault("platform_options", state.get("platform_options") or {})
    cls: type[BaseRun] = TuneRun if state["kind"] == "tune" else TrainRun
    if state.get("workflow"):  # phases deployed by a search (docs/search.md)
        from faasml.runtime.workflow_run import WorkflowRun

        cls = WorkflowRun
    state.pop("stop_reason", None)  # the run goes on: a reason it stopped is history now
    for trial in state["trials"]:
        if trial["status"] in ("running", "stopped"):  # stopped by the run, not finished
            trial["status"] = "pending"
    run = cls(job, constraint, run_dir, state=state, **kwargs)
    if "profile" in state:
        run.measured()  # the profile (and calibration) the run was planned and corrected with
    return run
