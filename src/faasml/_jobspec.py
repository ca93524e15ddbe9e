"""The records of a job file: ``JobSpec`` and its sections, frozen and already validated.

Public through ``faasml.config``; ``faasml._jobparse`` builds them from a mapping and
``faasml._jobcheck`` holds the checks that need other layers (data, models, catalogs).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faasml._jobworkflow import WorkflowSpec
from faasml._layers import redact_url, set_path
from faasml._validate import shown
from faasml.exceptions import ConfigError
from faasml.models.shape import DEFAULT_EPOCHS_PER_STAGE, SuccessiveHalving
from faasml.searchspace import SearchSpace
from faasml.sync.stores import is_store_url, storage_name
from faasml.workloads import Model, create_model
from faasml.workloads.data import Dataset, generate_dataset, load_dataset
from faasml.workloads.optim import OPTIMIZERS, Optimizer, create_optimizer

METRICS = ("loss", "accuracy")


@dataclass(frozen=True)
class ModelSpec:
    """``model:``: a built-in name (``MODELS``) or ``module.path:factory``, plus its options."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def build(self, input_shape: tuple[int, ...], num_classes: int) -> Model:
        """The model for data of this shape (see ``faasml.workloads.create_model``)."""
        return create_model(
            self.name, input_shape, num_classes, **copy.deepcopy(dict(self.options))
        )


@dataclass(frozen=True)
class DatasetSpec:
    """``dataset:``: a seeded generator (``synthetic``, ``samples``) or a file (``path``)."""

    synthetic: str | None
    samples: int | None
    path: str | None
    format: str | None
    options: Mapping[str, Any]
    test_fraction: float
    seed: int

    def load(self) -> tuple[Dataset, Dataset]:
        """(train, test): the data generated or read, split with ``test_fraction`` (seeded)."""
        if self.synthetic is not None:
            data = generate_dataset(
                self.synthetic, self.samples or 0, seed=self.seed, **dict(self.options)
            )
        else:
            data = load_dataset(self.format or "", self.path or "", **dict(self.options))
        return data.split(self.test_fraction, self.seed)


@dataclass(frozen=True)
class OptimizerSpec:
    """``optimizer:``: a name (``OPTIMIZERS``) and its hyperparameters (``lr`` required)."""

    name: str
    hyperparameters: Mapping[str, Any]

    def build(self, num_params: int) -> Optimizer:
        return create_optimizer(self.name, num_params, **dict(self.hyperparameters))


@dataclass(frozen=True)
class TuningSpec:
    """``tuning:``: successive halving over ``trials`` sampled configurations.

    Stage i runs ``trials // reduction_factor**i`` trials for ``epochs_per_stage`` epochs
    each and keeps the best 1/η by ``metric`` (validation loss or accuracy). Stages and
    epochs left out take the one default rule of ``faasml.models.shape``.
    """

    trials: int
    reduction_factor: int = 2
    epochs_per_stage: int = DEFAULT_EPOCHS_PER_STAGE
    stages: int | None = None
    """None: ``default_stages`` (filled in when the spec is made)."""
    metric: str = "loss"

    def __post_init__(self) -> None:
        object.__setattr__(self, "stages", self.shape.stages)

    @property
    def shape(self) -> SuccessiveHalving:
        """The job's stages as the planners see them (checked: ConfigError when impossible)."""
        return SuccessiveHalving(
            self.trials, self.reduction_factor, self.stages, self.epochs_per_stage
        )

    @property
    def trials_per_stage(self) -> tuple[int, ...]:
        return self.shape.trial_counts


@dataclass(frozen=True)
class TrainingSpec:
    """``training:``: train one configuration until ``target_loss`` or ``max_epochs``."""

    target_loss: float | None = None
    max_epochs: int = 10


@dataclass(frozen=True)
class JobSpec:
    """A validated job file. ``batch_size`` is per worker (b_z of the performance model)."""

    name: str
    model: ModelSpec
    dataset: DatasetSpec
    optimizer: OptimizerSpec
    batch_size: int = 64
    seed: int = 0
    search_space: SearchSpace | None = None
    tuning: TuningSpec | None = None
    training: TrainingSpec = field(default_factory=TrainingSpec)
    platform: str = "local"
    store: str = "embedded"
    """The store gradients go through: a URL, a name of ``stores``, or a store faasml provides
    itself (``embedded``: a directory of the run; ``vm-ps``: a parameter server on loopback)."""
    stores: Mapping[str, str] = field(default_factory=dict)
    """More stores the planner may choose among: catalog storage name -> URL."""
    catalog: str = "local"
    profile: str | None = None
    description: str = ""
    source: str | None = None
    workflow: WorkflowSpec | None = None
    """``workflow:``: demands that change while training (faasml._jobworkflow)."""
    """The file the job was read from (None when built from a mapping)."""

    @classmethod
    def from_mapping(
        cls,
        data: Mapping[str, Any],
        *,
        base_dir: Path | None = None,
        source: str | None = None,
    ) -> JobSpec:
        """Validate a job mapping; relative dataset paths are resolved against ``base_dir``."""
        from faasml._jobparse import parse_job

        return parse_job(data, base_dir or Path.cwd(), source)

    def to_dict(self, *, redact: bool = True) -> dict[str, Any]:
        """The job as a mapping ``from_mapping`` accepts (store credentials redacted)."""
        data: dict[str, Any] = {
            "name": self.name,
            "model": {"name": self.model.name, **copy.deepcopy(dict(self.model.options))},
            "dataset": _dataset_dict(self.dataset),
            "optimizer": {"name": self.optimizer.name, **dict(self.optimizer.hyperparameters)},
            "batch_size": self.batch_size,
            "seed": self.seed,
            "training": {"max_epochs": self.training.max_epochs},
            "platform": self.platform,
            "store": redact_url(self.store) if redact else self.store,
            "catalog": self.catalog,
        }
        if self.stores:
            data["stores"] = {
                name: redact_url(url) if redact else url for name, url in self.stores.items()
            }
        if self.training.target_loss is not None:
            data["training"]["target_loss"] = self.training.target_loss
        if self.description:
            data["description"] = self.description
        if self.profile is not None:
            data["profile"] = self.profile
        if self.search_space is not None:
            data["search_space"] = self.search_space.to_dict()
        if self.workflow is not None:
            data["workflow"] = self.workflow.to_dict()
        if self.tuning is not None:
            data["tuning"] = {
                "trials": self.tuning.trials,
                "reduction_factor": self.tuning.reduction_factor,
                "epochs_per_stage": self.tuning.epochs_per_stage,
                "stages": self.tuning.stages,
                "metric": self.tuning.metric,
            }
        return data

    def sync_stores(self) -> dict[str, str | None]:
        """Catalog storage name -> URL of every store this job may synchronise through, its
        ``store`` first (None where faasml provides the store itself: ``embedded``, ``vm-ps``)."""
        if is_store_url(self.store):
            configured: dict[str, str | None] = {storage_name(self.store): self.store}
        else:
            configured = {self.store: self.stores.get(self.store)}
        for name, url in self.stores.items():
            configured.setdefault(name, url)
        return configured

    def sample_configs(self, n: int | None = None) -> list[dict[str, Any]]:
        """The seeded configurations of a tuning run (``tuning.trials`` unless ``n`` is given)."""
        if self.search_space is None:
            raise ConfigError(f"job '{self.name}' has no search_space to sample from")
        count = n if n is not None else (self.tuning.trials if self.tuning else 1)
        return self.search_space.sample(count, self.seed)

    def with_config(self, config: Mapping[str, Any]) -> JobSpec:
        """This job with one configuration applied (keys as in ``search_space``), revalidated."""
        data = self.to_dict(redact=False)
        for key, value in config.items():
            set_path(data, resolve_hyperparameter(key, self.optimizer.name), copy.deepcopy(value))
        data["dataset"] = {}
        from faasml._jobparse import parse_job

        return parse_job(data, Path.cwd(), self.source, dataset=self.dataset, trial=True)

    def require_tuning(self) -> TuningSpec:
        """The tuning section, or a ConfigError saying the job has none."""
        if self.tuning is None or self.search_space is None:
            raise ConfigError(
                f"job '{self.name}' has no tuning section and search_space; "
                "add both to tune it (see docs/jobs.md)"
            )
        return self.tuning


def resolve_hyperparameter(key: str, optimizer: str) -> str:
    """The job path a search-space key sets: bare optimizer hyperparameters (``lr``) are
    ``optimizer.<name>``; ``batch_size``, ``optimizer.*`` and ``model.*`` stand as written."""
    if key == "batch_size" or key.startswith(("optimizer.", "model.")):
        return key
    accepted = ["lr", *OPTIMIZERS.get(optimizer).defaults] if optimizer in OPTIMIZERS else []
    if key in accepted:
        return f"optimizer.{key}"
    raise ConfigError(
        f"search_space has hyperparameter {shown(key)}, but keys must be batch_size, "
        f"optimizer.<name>, model.<option>, or a hyperparameter of optimizer "
        f"'{optimizer}' ({', '.join(accepted)})"
    )


def _dataset_dict(spec: DatasetSpec) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if spec.synthetic is not None:
        data.update(synthetic=spec.synthetic, samples=spec.samples)
    else:
        data.update(path=spec.path, format=spec.format)
    data.update(copy.deepcopy(dict(spec.options)))
    data.update(test_fraction=spec.test_fraction, seed=spec.seed)
    return data
