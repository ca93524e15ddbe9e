"""What a tuning run of a job would plan from, found without running anything: the job's
workload and catalog, priced from its cached measured profile where one is cached (read as
``job_profile`` keeps it: not measured, not re-checked), else from the profile the job names.
``faasml plan tune JOB.yaml`` plans from these, so its plan is the one ``faasml tune`` makes."""

from __future__ import annotations

from dataclasses import dataclass

from faasml.catalog import Catalog, load_catalog
from faasml.job import JobSpec
from faasml.models.config_cost import mean_factor
from faasml.runtime.coordinator import CoordinatorOptions
from faasml.runtime.coordinator.estimates import coordinator_seconds
from faasml.runtime.profile.measure import (
    cached_profile,
    planning_inputs,
    platform_options_for,
    profile_key,
)
from faasml.runtime.profile.record import JobProfile
from faasml.runtime.runs.base import job_workload, stores_catalog
from faasml.workload import Workload
from faasml.workloads.build import build_model, load_data


@dataclass(frozen=True)
class JobInputs:
    """The workload and catalog the planners price a job with, and where they came from."""

    workload: Workload
    catalog: Catalog
    profile: JobProfile | None
    """The job's cached measured profile (None: none is cached; the job's ``profile:``)."""


def job_inputs(job: JobSpec, catalog: Catalog | None = None) -> JobInputs:
    """``job``'s planning inputs as its tuning run finds them before it plans (``BaseRun``):
    the job's stores in ``catalog`` (default: the job's), its real data and model sizes, and
    where its profile is cached, the measured figures with the sampled trials' mean cost
    (``TuneRun._compute_factor``). The coordinator's seconds between invocations, which a
    run measures as it starts, are priced at half a poll period (no commit measured yet)."""
    chosen = stores_catalog(catalog or load_catalog(job.catalog), job.sync_stores())
    train, _ = load_data(job.dataset)
    model = build_model(job.model, train.input_shape, train.num_classes)
    workload = job_workload(job, train, model)
    key = profile_key(job, chosen, platform_options_for(job, model, {}))
    profile = cached_profile(key)
    if profile is None:
        return JobInputs(workload, chosen, None)
    factor = mean_factor(job.sample_configs(), profile.config_costs)
    between = coordinator_seconds([], [], CoordinatorOptions().poll_s)
    measured, priced = planning_inputs(
        profile, workload, chosen, coordinator_s=between, compute_factor=factor
    )
    return JobInputs(measured, priced, profile)
