"""The checks of a job that reach into other layers: its data, model, catalog, platform, profile.

``check_job`` is the one validation ``load_job`` and ``faasml.job.from_mapping`` run, once, so
``faasml job check``, ``faasml tune``, ``faasml train`` and the Python API refuse the same jobs
with the same message. None of them runs the job's own code (a ``module:factory`` model).
"""

from __future__ import annotations

from faasml._validate import shown
from faasml.exceptions import ConfigError
from faasml.job.spec import JobSpec
from faasml.job.trials import apply_config, check_batch_size, check_trial
from faasml.job.workflow import check_workflow
from faasml.searchspace import SearchSpace
from faasml.workloads.data import Dataset


def check_job(job: JobSpec) -> None:
    """Every rule a job must keep before anything runs; raises a one-line ``ConfigError``."""
    check_trial(job)
    _check_tuning(job)
    _check_tuning_workflow(job)
    _check_platform(job)
    _check_catalog(job)
    _check_profile(job)
    if job.search_space is not None:
        _check_search_space(job, job.search_space)


def check_data(job: JobSpec, train: Dataset) -> None:
    """The rules that need the data read (a file's sample count): batch size <= samples."""
    check_batch_size(job.batch_size, len(train), job.dataset)
    if job.workflow is not None:
        check_workflow(job.workflow, len(train))


def _check_tuning(job: JobSpec) -> None:
    tuning = job.tuning
    if tuning is None:
        return
    most = max(2, tuning.trials)
    if tuning.reduction_factor > most:
        raise ConfigError(
            f"the value of tuning.reduction_factor is {tuning.reduction_factor}, but must be "
            f"<= {most} (tuning.trials, at least 2): a larger η keeps no trial to compare "
            "after the first stage"
        )


def _check_tuning_workflow(job: JobSpec) -> None:
    """A tuning job's stages are planned by the model (``tuning:``); a ``workflow:`` (phases
    deployed by a search) is a training job's. Refused, not silently ignored."""
    if job.tuning is not None and job.workflow is not None:
        raise ConfigError(
            f"the job has both tuning: and workflow: ({job.workflow.kind}), but a workflow "
            "runs under faasml train only: a tuning job's stages are planned by the model; "
            "remove workflow: to tune, or tuning: to train with the workflow"
        )
    if job.tuning is not None and job.planner == "search":
        raise ConfigError(
            "the value of planner is 'search', but a tuning job's stages are planned by the "
            "model: planner: search is for faasml train (remove it, or tuning:)"
        )


PLATFORM_NAMES = ("lithops", "local", "ray")
"""The platforms a job may name: those ``faasml.runtime.platforms.contract.PLATFORMS``
implements (a job is read below the runtime's layer, so it knows them by name;
tests/test_layers.py checks that the two agree)."""


def _check_platform(job: JobSpec) -> None:
    if job.platform not in PLATFORM_NAMES:
        raise ConfigError(
            f"the value of platform is {shown(job.platform)}, but must be one of: "
            f"{', '.join(PLATFORM_NAMES)}"
        )


def _check_catalog(job: JobSpec) -> None:
    """The catalog loads, and prices every store the job may synchronise through."""
    from faasml.catalog import load_catalog

    try:
        catalog = load_catalog(job.catalog)
    except ConfigError as err:
        raise ConfigError(f"the value of catalog is {shown(job.catalog)}, but {err}") from None
    missing = [name for name in job.sync_stores() if name not in catalog.storages]
    if missing:
        raise ConfigError(
            f"the job synchronises through {', '.join(missing)}, but catalog {catalog.name} "
            f"prices no storage of that name; it offers {', '.join(sorted(catalog.storages))} "
            "(name the job's stores after them, or point catalog: at one that prices yours)"
        )


def _check_profile(job: JobSpec) -> None:
    if job.profile is None:
        return
    from faasml.workload import load_workload

    try:
        load_workload(job.profile)
    except ConfigError as err:
        raise ConfigError(f"the value of profile is {shown(job.profile)}, but {err}") from None


def _check_search_space(job: JobSpec, space: SearchSpace) -> None:
    """Every bound or choice of every hyperparameter must make a valid job (a conditional one
    with the values its condition needs, e.g. momentum with optimizer.name sgd)."""
    for key, distribution in space.params.items():
        needs = dict(space.conditions.get(key, {}))
        for value in distribution.extremes():
            try:
                apply_config(job, {**needs, key: value})
            except ConfigError as err:
                raise ConfigError(
                    f"search_space.{key} allows {shown(value)}, which makes an invalid job: {err}"
                ) from None
