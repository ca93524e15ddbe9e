"""The YAML job file: what to train, on which data, how to tune it, and where to run it.

A job is read in layers, later ones winning: the file < the environment (``FAASML_*``) <
keyword overrides; the merged mapping is then validated once into a frozen ``JobSpec``, and
every error names the field and the rule (docs/jobs.md documents the format). Credentials
never belong in a job file: a store URL with a password in the file is refused, and
``JobSpec.to_dict()`` redacts one that came from the environment.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from faasml._layers import (
    ENV_FIELDS,
    ENV_PREFIX,
    ENV_SECTIONS,
    environment_overrides,
    has_password,
    parse_assignments,
    redact_url,
    set_path,
)
from faasml._validate import Fields, load_yaml
from faasml.exceptions import ConfigError, UnknownNameError
from faasml.searchspace import SearchSpace, parse_search_space
from faasml.sync.stores import is_store_url, storage_name
from faasml.workloads import MODELS, Model, create_model
from faasml.workloads._base import check_options
from faasml.workloads.data import (
    FORMATS,
    GENERATORS,
    Dataset,
    generate_dataset,
    load_dataset,
    option_names,
)
from faasml.workloads.optim import OPTIMIZERS, Optimizer, create_optimizer

METRICS = ("loss", "accuracy")
_MODULE_ATTR = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
_SUFFIX_FORMATS = {".csv": "higgs-csv", ".gz": "higgs-csv", ".bin": "cifar10-bin"}


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

    Stage i runs ``max(1, trials // reduction_factor**i)`` trials for ``epochs_per_stage``
    epochs each and keeps the best 1/η by ``metric`` (validation loss or accuracy).
    """

    trials: int
    reduction_factor: int = 2
    epochs_per_stage: int = 1
    stages: int = 1
    metric: str = "loss"

    @property
    def trials_per_stage(self) -> tuple[int, ...]:
        return tuple(max(1, self.trials // self.reduction_factor**i) for i in range(self.stages))


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
        return _parse_job(data, base_dir or Path.cwd(), source)

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
        return _parse_job(data, Path.cwd(), self.source, dataset=self.dataset, check_space=False)

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
        f"search_space has hyperparameter {key!r}, but keys must be batch_size, "
        f"optimizer.<name>, model.<option>, or a hyperparameter of optimizer "
        f"'{optimizer}' ({', '.join(accepted)})"
    )


def load_job(
    path: str | Path,
    overrides: Mapping[str, Any] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> JobSpec:
    """Read a job file, apply the environment then ``overrides`` (dotted paths), validate."""
    file = Path(path)
    data = load_yaml(file, ConfigError)
    if not isinstance(data, Mapping):
        raise ConfigError(f"{file} must hold a mapping of job fields, not {type(data).__name__}")
    stores = data.get("stores")
    named = [("store", data.get("store"), f"{ENV_PREFIX}STORE")] + [
        (f"stores.{name}", url, f"{ENV_PREFIX}STORES__{str(name).upper()}")
        for name, url in (stores.items() if isinstance(stores, Mapping) else ())
    ]
    for where, url, variable in named:
        if isinstance(url, str) and has_password(url):
            raise ConfigError(
                f"{file}: the value of {where} holds a password; credentials never go in job "
                f"files: set {variable} in the environment or use the service's credential file"
            )
    merged = copy.deepcopy(dict(data))
    for key, value in environment_overrides(os.environ if environ is None else environ).items():
        set_path(merged, key, value)
    for key, value in (overrides or {}).items():
        set_path(merged, key, value)
    return _parse_job(merged, file.resolve().parent, str(file))


def _dataset_dict(spec: DatasetSpec) -> dict[str, Any]:
    data: dict[str, Any] = {}
    if spec.synthetic is not None:
        data.update(synthetic=spec.synthetic, samples=spec.samples)
    else:
        data.update(path=spec.path, format=spec.format)
    data.update(copy.deepcopy(dict(spec.options)))
    data.update(test_fraction=spec.test_fraction, seed=spec.seed)
    return data


def _parse_job(
    data: Mapping[str, Any],
    base_dir: Path,
    source: str | None,
    *,
    dataset: DatasetSpec | None = None,
    check_space: bool = True,
) -> JobSpec:
    f = Fields(data, "", ConfigError)
    name = f.text("name")
    seed = f.integer("seed", 0, minimum=0)
    optimizer = _optimizer(f.sub("optimizer"))
    model = _model(f.raw("model"))
    data_spec = dataset if dataset is not None else _dataset(f.sub("dataset"), seed, base_dir)
    f.raw("dataset", None)
    description = f.raw("description", "")
    if not isinstance(description, str):
        raise f.fail("description", description, "must be a string")
    profile = f.raw("profile", None)
    if profile is not None and (not isinstance(profile, str) or not profile.strip()):
        raise f.fail("profile", profile, "must be a workload profile name or path")
    if profile is not None:
        profile = _resolve_file(profile, base_dir)
    search_space = parse_search_space(f.raw("search_space")) if f.has("search_space") else None
    tuning = _tuning(f.sub("tuning")) if f.has("tuning") else None
    if tuning is not None and search_space is None:
        raise ConfigError("tuning needs a search_space to sample its trials from")
    job = JobSpec(
        name=name,
        model=model,
        dataset=data_spec,
        optimizer=optimizer,
        batch_size=f.integer("batch_size", 64, minimum=1),
        seed=seed,
        search_space=search_space,
        tuning=tuning,
        training=_training(f.sub("training", {})),
        platform=f.text("platform", "local"),
        store=f.text("store", "embedded"),
        stores=_stores(f.sub("stores", {})),
        catalog=_resolve_file(f.text("catalog", "local"), base_dir),
        profile=profile,
        description=description,
        source=source,
    )
    f.finish()
    _check_store(job)
    _check_model_fits(job)
    if search_space is not None and check_space:
        _check_search_space(job, search_space)
    return job


PROVIDED_STORES = ("embedded", "vm-ps")
"""Stores faasml provides itself, named without a URL."""


def _stores(f: Fields) -> dict[str, str]:
    """``stores``: catalog storage name -> store URL (a known scheme)."""
    found = {str(name): f.text(str(name)) for name in list(f.data)}
    f.finish()
    for name, url in found.items():
        _check_url(f"stores.{name}", url)
    return found


def _check_store(job: JobSpec) -> None:
    if is_store_url(job.store):
        _check_url("store", job.store)
    elif job.store not in PROVIDED_STORES and job.store not in job.stores:
        raise ConfigError(
            f"the value of store is {job.store!r}, but must be a store URL, a name under "
            f"stores ({', '.join(job.stores) or 'none given'}) or one faasml provides itself "
            f"({', '.join(PROVIDED_STORES)})"
        )


def _check_url(where: str, url: str) -> None:
    """A store URL with a known scheme; errors show it with any password redacted."""
    shown = f"the value of {where} is {redact_url(url)!r}"
    if not is_store_url(url):
        raise ConfigError(f"{shown}, but must be a store URL such as redis://127.0.0.1:6379/0")
    try:
        storage_name(url)
    except UnknownNameError as err:
        raise ConfigError(f"{shown}, but {err}") from None


def _resolve_file(value: str, base_dir: Path) -> str:
    """A ``.yaml`` path relative to the job file made absolute; a shipped name stays a name."""
    if Path(value).suffix in {".yaml", ".yml"}:
        return str((base_dir / Path(value).expanduser()).resolve())
    return value


def _check_model_fits(job: JobSpec) -> None:
    """Build the model on two generated samples, so bad option values fail at load time.

    Only for generated data: a file's shape is known once it is read, when the model is built.
    """
    spec = job.dataset
    if spec.synthetic is None:
        return
    sample = generate_dataset(spec.synthetic, 2, seed=spec.seed, **dict(spec.options))
    job.model.build(sample.input_shape, sample.num_classes)


def _model(value: Any) -> ModelSpec:
    f = Fields({"name": value} if isinstance(value, str) else value, "model", ConfigError)
    name = f.text("name")
    options = {key: f.raw(key) for key in f.data if key != "name"}
    if ":" in name:
        if not _MODULE_ATTR.match(name):
            raise f.fail("name", name, "must be a built-in model or 'module.path:factory'")
    elif name not in MODELS:
        raise f.fail("name", name, f"must be one of: {', '.join(MODELS.names())}")
    else:
        check_options(f"model '{name}'", MODELS.get(name), options, ("input_shape", "num_classes"))
    f.finish()
    return ModelSpec(name, options)


def _optimizer(f: Fields) -> OptimizerSpec:
    name = f.choice("name", OPTIMIZERS.names(), "sgd")
    hyperparameters = {key: f.raw(key) for key in f.data if key != "name"}
    create_optimizer(name, 1, **hyperparameters)  # raises a ConfigError naming the field
    f.finish()
    return OptimizerSpec(name, hyperparameters)


def _dataset(f: Fields, seed: int, base_dir: Path) -> DatasetSpec:
    fixed = {"synthetic", "samples", "path", "format", "test_fraction", "seed"}
    if f.has("synthetic") == f.has("path"):
        raise ConfigError(
            "dataset needs exactly one of synthetic (a generator: "
            f"{', '.join(sorted(GENERATORS))}) or path (a file or folder)"
        )
    synthetic = samples = path = form = None
    if f.has("synthetic"):
        synthetic = f.choice("synthetic", sorted(GENERATORS))
        samples = f.integer("samples", minimum=2)
        accepted = option_names("synthetic", synthetic)
    else:
        resolved = base_dir / Path(f.text("path")).expanduser()
        if not resolved.exists():
            raise f.fail(
                "path", f.data["path"], f"must name an existing file or folder ({resolved})"
            )
        path = str(resolved)
        guess = "cifar10-bin" if resolved.is_dir() else _SUFFIX_FORMATS.get(resolved.suffix)
        form = f.choice("format", FORMATS, guess) if guess else f.choice("format", FORMATS)
        accepted = option_names("format", form)
    options = {key: f.raw(key) for key in f.data if key not in fixed}
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigError(
            f"dataset has unknown field(s): {', '.join(unknown)}; besides "
            f"{', '.join(sorted(fixed))} it accepts: {', '.join(accepted) or 'none'}"
        )
    test_fraction = f.number("test_fraction", 0.2, minimum=0.0, maximum=0.9)
    spec = DatasetSpec(
        synthetic=synthetic,
        samples=samples,
        path=path,
        format=form,
        options=options,
        test_fraction=test_fraction,
        seed=f.integer("seed", seed, minimum=0) if f.has("seed") else seed,
    )
    f.finish()
    return spec


def _tuning(f: Fields) -> TuningSpec:
    trials = f.integer("trials", minimum=1)
    eta = f.integer("reduction_factor", 2, minimum=2)
    most = 1  # stages while trials // eta**i >= 1, counted exactly in integers
    while trials // eta**most >= 1:
        most += 1
    stages = f.integer("stages", most, minimum=1)
    if stages > most:
        raise f.fail(
            "stages",
            stages,
            f"must be <= {most}: with {trials} trials and reduction_factor {eta} "
            f"stage {most + 1} would have no trial to run",
        )
    spec = TuningSpec(
        trials=trials,
        reduction_factor=eta,
        epochs_per_stage=f.integer("epochs_per_stage", 1, minimum=1),
        stages=stages,
        metric=f.choice("metric", METRICS, "loss"),
    )
    f.finish()
    return spec


def _training(f: Fields) -> TrainingSpec:
    spec = TrainingSpec(
        target_loss=f.optional_number("target_loss", minimum=0.0, strict_minimum=True),
        max_epochs=f.integer("max_epochs", 10, minimum=1),
    )
    f.finish()
    return spec


def _check_search_space(job: JobSpec, space: SearchSpace) -> None:
    """Every bound or choice of every hyperparameter must make a valid job."""
    for key, distribution in space.params.items():
        for value in distribution.extremes():
            try:
                job.with_config({key: value})
            except ConfigError as err:
                raise ConfigError(
                    f"search_space.{key} allows {value!r}, which makes an invalid job: {err}"
                ) from None


__all__ = [
    "ENV_FIELDS",
    "ENV_PREFIX",
    "ENV_SECTIONS",
    "DatasetSpec",
    "JobSpec",
    "ModelSpec",
    "OptimizerSpec",
    "TrainingSpec",
    "TuningSpec",
    "environment_overrides",
    "load_job",
    "parse_assignments",
    "redact_url",
    "resolve_hyperparameter",
]
