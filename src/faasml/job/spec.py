"""The records of a job file: ``JobSpec`` and its sections, frozen, plain, building nothing.

``faasml.job.parse`` makes them from a mapping, ``faasml.job.checks`` checks them against
workloads, catalogs and platforms; ``faasml.workloads.build`` builds what they describe.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from faasml.exceptions import ConfigError
from faasml.job.layers import redact_url
from faasml.job.workflow import SearchOptions, WorkflowSpec
from faasml.models.shape import DEFAULT_EPOCHS_PER_STAGE, SuccessiveHalving
from faasml.samplers import ConfigSampler
from faasml.searchspace import SearchSpace
from faasml.sync.stores import is_store_url, storage_name

if TYPE_CHECKING:
    from faasml.planners.tuning import TuningJob

METRICS = ("loss", "accuracy")
"""The metrics every trial has; any other name a trial reports can rank too."""
MODES = ("min", "max")


def implied_mode(metric: str) -> str | None:
    """The mode a metric's name implies: 'max' for an accuracy, 'min' for a loss; None for
    any other name (its mode must be given: faasml cannot tell which way is better)."""
    name = metric.lower()
    if name.endswith("accuracy"):
        return "max"
    if name.endswith("loss"):
        return "min"
    return None


@dataclass(frozen=True)
class ModelSpec:
    """``model:``: a built-in name (``MODELS``) or ``module.path:factory``, plus its options."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)


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


@dataclass(frozen=True)
class OptimizerSpec:
    """``optimizer:``: a name (``OPTIMIZERS``) and its hyperparameters (``lr`` required)."""

    name: str
    hyperparameters: Mapping[str, Any]


@dataclass(frozen=True)
class TuningSpec:
    """``tuning:``: successive halving over ``trials`` sampled configurations.

    Stage i runs ``trials // reduction_factor**i`` trials for ``epochs_per_stage`` epochs
    each and keeps the best 1/η by ``metric`` (validation loss or accuracy, or any metric
    the trials report) in ``mode`` ('min' or 'max', implied for a loss or an accuracy).
    Stages and epochs left out take the one default rule of ``faasml.models.shape``.
    """

    trials: int
    reduction_factor: int = 2
    epochs_per_stage: int = DEFAULT_EPOCHS_PER_STAGE
    stages: int | None = None
    """None: ``default_stages`` (filled in when the spec is made)."""
    metric: str = "loss"
    mode: str | None = None
    """None: the mode ``metric`` implies (``implied_mode``; filled in when the spec is made)."""
    sampler: str = "random"
    """How configurations are drawn (``faasml.samplers``: random, grid, tpe, gp)."""
    sampler_options: Mapping[str, Any] = field(default_factory=dict)
    hyperband: int | None = None
    """Hyperband's largest epoch budget R: every bracket of ``hyperband(R, η)`` in turn, in
    place of one successive halving (``trials`` and ``stages`` are then the brackets' sums)."""

    def __post_init__(self) -> None:
        self._set_mode()
        if self.hyperband is None:
            object.__setattr__(self, "stages", self.shape.stages)
            return
        brackets = self.brackets
        object.__setattr__(self, "trials", sum(b.trials for b in brackets))
        object.__setattr__(self, "stages", sum(b.stages for b in brackets))

    def _set_mode(self) -> None:
        if self.mode is None:
            mode = implied_mode(self.metric)
            if mode is None:
                raise ConfigError(
                    f"tuning.mode is missing: say whether the metric {self.metric!r} is best "
                    "low ('min') or high ('max')"
                )
            object.__setattr__(self, "mode", mode)
        elif self.mode not in MODES:
            raise ConfigError(
                f"the value of tuning.mode is {self.mode!r}, but must be 'min' or 'max'"
            )

    @property
    def default_hyperband(self) -> int:
        """The R ``--hyperband`` takes when given none: the job's own, or the epochs its
        successive halving trains a trial that survives every stage (the same largest
        budget)."""
        if self.hyperband is not None:
            return self.hyperband
        return (self.stages or 1) * self.epochs_per_stage

    @property
    def shape(self) -> SuccessiveHalving:
        """The job's stages as the planners see them (checked: ConfigError when impossible);
        with ``hyperband``, its first bracket."""
        if self.hyperband is not None:
            return self.brackets[0]
        return SuccessiveHalving(
            self.trials, self.reduction_factor, self.stages, self.epochs_per_stage
        )

    @property
    def brackets(self) -> tuple[SuccessiveHalving, ...]:
        """The successive-halving runs in turn: Hyperband's brackets, or the one job."""
        if self.hyperband is None:
            return (self.shape,)
        from faasml.planners.tuning import hyperband

        return hyperband(self.hyperband, self.reduction_factor)

    @property
    def plan_job(self) -> TuningJob:
        """Every stage, as the planners take it (the brackets' stages one after another)."""
        from faasml.planners.tuning import concatenate

        return self.shape if self.hyperband is None else concatenate(self.brackets)

    @property
    def trials_per_stage(self) -> tuple[int, ...]:
        return tuple(self.plan_job.trial_counts)


@dataclass(frozen=True)
class TrainingSpec:
    """``training:``: train one configuration until ``target_loss`` or ``max_epochs``."""

    target_loss: float | None = None
    max_epochs: int = 10


@dataclass(frozen=True)
class AssimilateSpec:
    """``assimilate:`` (WindSR models): station observations assimilated when the run evaluates,
    reported beside the plain super-resolution; ``faasml predict`` applies it too."""

    stations: str | int = "data"
    """'data' (the dataset's own stations), a number of stations per patch, or a stations file."""
    radius: str | int = "dynamic"
    strength: float = 1.0
    inpaint: bool = True
    cells: tuple[tuple[int, int], ...] = ()
    """A stations file's cells (row, col), read when the job is read."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "stations": self.stations,
            "radius": self.radius,
            "strength": self.strength,
            "inpaint": self.inpaint,
        }

    def model_option(self) -> dict[str, Any]:
        """The WindSR models' ``assimilate`` option (a file's cells in place of its path)."""
        stations = [list(c) for c in self.cells] if self.cells else self.stations
        return {**self.to_dict(), "stations": stations}


@dataclass(frozen=True)
class JobSpec:
    """A validated job file. ``batch_size`` is the global batch B, split over the functions."""

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
    """The file the job was read from (None when built from a mapping)."""
    workflow: WorkflowSpec | None = None
    """``workflow:``: demands that change while training (``faasml.job.workflow``)."""
    assimilate: AssimilateSpec | None = None
    """``assimilate:``: stations assimilated when a WindSR run evaluates."""

    def model_options(self) -> dict[str, Any]:
        """The options the run builds its model with: ``model:``'s, plus ``assimilate:`` as
        the WindSR models' ``assimilate`` option."""
        options = copy.deepcopy(dict(self.model.options))
        if self.assimilate is not None:
            options["assimilate"] = self.assimilate.model_option()
        return options

    planner: str = "model"
    """``planner:`` of a training job: ``model`` (the analytical model's choice) or ``search``
    (a deployment search probes real allocations first, docs/search.md)."""
    search: SearchOptions | None = None
    """``search:`` with ``planner: search``: the searcher and its budget (None: defaults)."""

    def search_workflow(self) -> WorkflowSpec | None:
        """The phases a deployment search deploys: the job's ``workflow:``, or, with
        ``planner: search`` and none, one phase of the whole training (None: the model plans)."""
        if self.workflow is not None or self.planner != "search":
            return self.workflow
        search = self.search or SearchOptions()
        return WorkflowSpec("dynamic-batching", ((0, self.batch_size),), search=search)

    def to_dict(self, *, redact: bool = True) -> dict[str, Any]:
        """The job as a mapping ``faasml.job.from_mapping`` accepts (store credentials redacted)."""
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
        if self.assimilate is not None:
            data["assimilate"] = self.assimilate.to_dict()
        if self.planner != "model":
            data["planner"] = self.planner
        if self.search is not None:
            data["search"] = WorkflowSpec("dynamic-batching", search=self.search).to_dict()[
                "search"
            ]
        if self.tuning is not None:
            data["tuning"] = {
                "trials": self.tuning.trials,
                "reduction_factor": self.tuning.reduction_factor,
                "epochs_per_stage": self.tuning.epochs_per_stage,
                "stages": self.tuning.stages,
                "metric": self.tuning.metric,
            }
            if self.tuning.mode != implied_mode(self.tuning.metric):  # else left implied
                data["tuning"]["mode"] = self.tuning.mode
            if self.tuning.sampler != "random":
                data["tuning"]["sampler"] = self.tuning.sampler
            if self.tuning.sampler_options:
                data["tuning"]["sampler_options"] = dict(self.tuning.sampler_options)
            if self.tuning.hyperband is not None:
                for key in ("trials", "stages", "epochs_per_stage"):
                    del data["tuning"][key]
                data["tuning"]["hyperband"] = self.tuning.hyperband
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
        """The seeded configurations a tuning run draws before any result is known, by its
        sampler (``tuning.trials`` unless ``n`` is given)."""
        return self.config_sampler().draw(
            n if n is not None else (self.tuning.trials if self.tuning else 1)
        )

    def config_sampler(self, sampler: object = None) -> ConfigSampler:
        """The job's sampler over its search space (``sampler``: an Optuna sampler object in
        place of ``tuning.sampler``, with its ``min_points``), seeded by the job's seed."""
        if self.search_space is None:
            raise ConfigError(f"job '{self.name}' has no search_space to sample from")
        tuning = self.tuning
        name = sampler if sampler is not None else (tuning.sampler if tuning else "random")
        options = tuning.sampler_options if tuning else {}
        return ConfigSampler(self.search_space, name, self.seed, options)

    def require_tuning(self) -> TuningSpec:
        """The tuning section, or a ConfigError saying the job has none."""
        if self.tuning is None or self.search_space is None:
            raise ConfigError(
                f"job '{self.name}' has no tuning section and search_space; "
                "add both to tune it (see docs/jobs.md)"
            )
        return self.tuning


def _dataset_dict(spec: DatasetSpec) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if spec.synthetic is not None:
        data.update(synthetic=spec.synthetic, samples=spec.samples)
    else:
        data.update(path=spec.path, format=spec.format)
    data.update(copy.deepcopy(dict(spec.options)))
    data.update(test_fraction=spec.test_fraction, seed=spec.seed)
    return data
