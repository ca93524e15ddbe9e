"""The checks of a job that reach into other layers: its data, model, catalog, platform, profile.

``check_job`` is the one validation ``load_job`` and ``JobSpec.from_mapping`` run, so
``faasml job check``, ``faasml tune``, ``faasml train`` and the Python API refuse the same jobs
with the same message. ``check_trial`` is the part one trial's configuration can change.
"""

from __future__ import annotations

import math

from faasml._jobspec import DatasetSpec, JobSpec
from faasml._validate import MAX_DATA_VALUES, MAX_PARAMS, check_size, count_text, shown
from faasml.exceptions import ConfigError
from faasml.searchspace import SearchSpace
from faasml.workloads.data import Dataset, generate_dataset


def check_job(job: JobSpec) -> None:
    """Every rule a job must keep before anything runs; raises a one-line ``ConfigError``."""
    check_trial(job)
    _check_tuning(job)
    _check_platform(job)
    _check_catalog(job)
    _check_profile(job)
    if job.search_space is not None:
        _check_search_space(job, job.search_space)


def check_trial(job: JobSpec) -> None:
    """The rules a trial's configuration (batch size, model options) may break."""
    spec = job.dataset
    if spec.synthetic is None:
        return  # a file's size and shape are known once it is read: see ``check_data``
    check_batch_size(job.batch_size, training_samples(spec), spec)
    if job.workflow is not None:
        from faasml._jobworkflow import check_workflow

        check_workflow(job.workflow, training_samples(spec))
    # Built on two generated samples, so bad option values fail at load time; the generator
    # and the model factories bound their sizes before allocating anything.
    sample = generate_dataset(spec.synthetic, 2, seed=spec.seed, **dict(spec.options))
    per_sample = math.prod(sample.input_shape)
    check_size(
        f"dataset '{spec.synthetic}' (samples {count_text(spec.samples or 0)} × "
        f"{per_sample:,} per sample)",
        (spec.samples or 0) * per_sample,
        MAX_DATA_VALUES,
        "values",
        ConfigError,
    )
    model = job.model.build(sample.input_shape, sample.num_classes)
    # Built-in networks are refused before they are built; a linear model allocates nothing
    # until its parameters are made, and a user's factory is theirs: all are bounded here.
    check_size(f"model '{job.model.name}'", model.num_params, MAX_PARAMS, "parameters", ConfigError)
    check_sample = getattr(model, "check_sample", None)  # a model that can say the data is not its
    if callable(check_sample):
        check_sample(sample.features)


def check_data(job: JobSpec, train: Dataset) -> None:
    """The rules that need the data read (a file's sample count): batch size <= samples."""
    check_batch_size(job.batch_size, len(train), job.dataset)
    if job.workflow is not None:
        from faasml._jobworkflow import check_workflow

        check_workflow(job.workflow, len(train))


def training_samples(spec: DatasetSpec) -> int:
    """Samples left for training after the held-out split (as ``Dataset.split`` makes it)."""
    total = spec.samples or 0
    return total - round(spec.test_fraction * total)


def check_batch_size(batch_size: int, samples: int, spec: DatasetSpec) -> None:
    """A worker's batch cannot be larger than the training data."""
    held_out = f"after test_fraction {spec.test_fraction:g} is held out"
    if samples < 1:
        raise ConfigError(
            f"the dataset leaves no training sample {held_out}: "
            "give more samples or a smaller test_fraction"
        )
    if batch_size > samples:
        raise ConfigError(
            f"the value of batch_size is {batch_size}, but must be <= the {samples:,} "
            f"training samples ({held_out})"
        )


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


PLATFORM_NAMES = ("lithops", "local", "ray")
"""The platforms a job may name: those ``faasml.runtime.platform.PLATFORMS`` implements (a job
is read below the runtime's layer, so it knows them by name; tests/test_layers.py checks that
the two agree)."""


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
    """Every bound or choice of every hyperparameter must make a valid job."""
    for key, distribution in space.params.items():
        for value in distribution.extremes():
            try:
                job.with_config({key: value})
            except ConfigError as err:
                raise ConfigError(
                    f"search_space.{key} allows {shown(value)}, which makes an invalid job: {err}"
                ) from None
