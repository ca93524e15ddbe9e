"""What a job's records describe, built: its model, its data, its optimiser.

The records (``faasml.job.spec``) build nothing themselves; a ``module:factory`` model runs
the user's code here, so only running a job builds it (``faasml job check`` does not). The
job layer sits above this one, so its records are taken by the fields read (protocols).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Protocol

from faasml._validate import MAX_PARAMS, check_size
from faasml.exceptions import WorkloadError
from faasml.workloads import Model, create_model
from faasml.workloads.data import Dataset, generate_dataset, load_dataset
from faasml.workloads.optim import Optimizer, create_optimizer


class ModelSpec(Protocol):
    """A model by name and options (``faasml.job.spec.ModelSpec``)."""

    @property
    def name(self) -> str: ...
    @property
    def options(self) -> Mapping[str, Any]: ...


class DatasetSpec(Protocol):
    """Data generated or read, and its split (``faasml.job.spec.DatasetSpec``)."""

    @property
    def synthetic(self) -> str | None: ...
    @property
    def samples(self) -> int | None: ...
    @property
    def path(self) -> str | None: ...
    @property
    def format(self) -> str | None: ...
    @property
    def options(self) -> Mapping[str, Any]: ...
    @property
    def test_fraction(self) -> float: ...
    @property
    def seed(self) -> int: ...


class OptimizerSpec(Protocol):
    """An optimiser by name and hyperparameters (``faasml.job.spec.OptimizerSpec``)."""

    @property
    def name(self) -> str: ...
    @property
    def hyperparameters(self) -> Mapping[str, Any]: ...


def build_model(spec: ModelSpec, input_shape: tuple[int, ...], num_classes: int) -> Model:
    """The model for data of this shape (see ``faasml.workloads.create_model``), refused
    above ``MAX_PARAMS`` parameters (a user's factory is bounded only once it has run)."""
    model = create_model(spec.name, input_shape, num_classes, **copy.deepcopy(dict(spec.options)))
    check_size(f"model '{spec.name}'", model.num_params, MAX_PARAMS, "parameters", WorkloadError)
    return model


def load_data(spec: DatasetSpec) -> tuple[Dataset, Dataset]:
    """(train, test): the data generated or read, split with ``test_fraction`` (seeded)."""
    if spec.synthetic is not None:
        data = generate_dataset(
            spec.synthetic, spec.samples or 0, seed=spec.seed, **dict(spec.options)
        )
    else:
        data = load_dataset(spec.format or "", spec.path or "", **dict(spec.options))
    return data.split(spec.test_fraction, spec.seed)


def build_optimizer(spec: OptimizerSpec, num_params: int) -> Optimizer:
    """The optimiser of ``num_params`` parameters with the spec's hyperparameters."""
    return create_optimizer(spec.name, num_params, **dict(spec.hyperparameters))
