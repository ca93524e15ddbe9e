"""A job mapping read field by field into a ``JobSpec``; every error names the field and the rule.

Only the mapping is read here: the checks that reach workloads, catalogs and platforms are
``faasml.job.checks``, which ``load_job`` runs once on the result.
"""

from __future__ import annotations

import dataclasses
import importlib.machinery
import importlib.util
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faasml._validate import Fields, shown
from faasml.exceptions import ConfigError, UnknownNameError
from faasml.job.layers import redact_url
from faasml.job.spec import (
    METRICS,
    MODES,
    AssimilateSpec,
    DatasetSpec,
    JobSpec,
    ModelSpec,
    OptimizerSpec,
    TrainingSpec,
    TuningSpec,
)
from faasml.job.workflow import parse_workflow
from faasml.models.shape import DEFAULT_EPOCHS_PER_STAGE, default_stages, most_stages
from faasml.samplers import check_sampler
from faasml.searchspace import parse_search_space
from faasml.sync.stores import check_store_url, is_store_url, storage_name
from faasml.workloads import MODELS, check_options
from faasml.workloads.data import FORMATS, GENERATORS, option_names
from faasml.workloads.optim import OPTIMIZERS, create_optimizer

_MODULE_ATTR = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
MAX_TRIALS = 100_000
"""The most trials a tuning run may sample (the largest of the CE-scaling paper has 16,384)."""
_SUFFIX_FORMATS = {".csv": "higgs-csv", ".gz": "higgs-csv", ".bin": "cifar10-bin"}
_SUFFIX_FORMATS.update({".h5": "windsr", ".hdf5": "windsr", ".nc": "windsr"})


def parse_job(data: Mapping[str, Any], base_dir: Path, source: str | None) -> JobSpec:
    """Read a job mapping into a ``JobSpec``; relative paths resolve against ``base_dir``."""
    f = Fields(data, "", ConfigError)
    name = parse_name(f)
    seed = f.integer("seed", 0, minimum=0)
    optimizer = parse_optimizer(f.sub("optimizer"))
    model = parse_model(f.raw("model"))
    data_spec = _dataset(f.sub("dataset"), seed, base_dir)
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
        batch_size=parse_batch_size(f),
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
    if f.has("workflow"):
        flow = parse_workflow(f.raw("workflow"), model.name, job.training.max_epochs, base_dir)
        job = dataclasses.replace(job, workflow=flow)
    if f.has("assimilate"):
        if job.workflow is not None:  # its phases build their own models: it would be ignored
            raise ConfigError(
                "assimilate is not applied to the phases of a workflow; remove one of them"
            )
        assimilate = parse_assimilate(f.raw("assimilate"), model.name, base_dir, data_spec)
        job = dataclasses.replace(job, assimilate=assimilate)
    f.finish()
    _check_store(job)
    return job


NAME_RULE = (
    "must be one folder name (the run goes to runs/<name>-<time>): at most 100 characters, "
    "no / or \\, no control character, not starting with '.'"
)


def parse_name(f: Fields) -> str:
    """``name``: a single, safe path component, so the run's folder stays under ``runs/``."""
    name = f.text("name")
    unsafe = any(c in "/\\" or not c.isprintable() for c in name)
    if unsafe or name.startswith(".") or len(name) > 100:
        raise f.fail("name", name, NAME_RULE)
    return name


def parse_batch_size(f: Fields) -> int:
    """``batch_size``: the global batch (split over a trial's functions), at least 1."""
    return f.integer("batch_size", 64, minimum=1)


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
            f"the value of store is {shown(job.store)}, but must be a store URL, a name under "
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
    try:
        check_store_url(url)  # the store's own rule, as ``tune`` applies it when it opens one
    except ConfigError as err:
        raise ConfigError(f"{shown}, but {str(err).replace(url, redact_url(url))}") from None


def _resolve_file(value: str, base_dir: Path) -> str:
    """A ``.yaml`` path relative to the job file made absolute; a shipped name stays a name."""
    if Path(value).suffix in {".yaml", ".yml"}:
        return str((base_dir / Path(value).expanduser()).resolve())
    return value


def is_reference(model_name: str) -> bool:
    """A ``module.path:factory`` model: the user's code, imported only when the job runs."""
    return ":" in model_name


def parse_model(value: Any) -> ModelSpec:
    """``model:``: a built-in name with its options, or a reference to a user's factory whose
    shape is checked (the syntax, the module found) without importing it."""
    f = Fields({"name": value} if isinstance(value, str) else value, "model", ConfigError)
    name = f.text("name")
    options = {key: f.raw(key) for key in f.data if key != "name"}
    if is_reference(name):
        if not _MODULE_ATTR.match(name):
            raise f.fail("name", name, "must be a built-in model or 'module.path:factory'")
        module = name.partition(":")[0]
        if not _module_found(module):
            raise f.fail(
                "name", name, f"names module '{module}', which is not found on the Python path"
            )
    elif name not in MODELS:
        raise f.fail("name", name, f"must be one of: {', '.join(MODELS.names())}")
    else:
        check_options(f"model '{name}'", MODELS.get(name), options, ("input_shape", "num_classes"))
    f.finish()
    return ModelSpec(name, options)


def _module_found(dotted: str) -> bool:
    """Whether ``dotted`` names a module Python could import, found without running any of
    its code (or its packages'): each part is looked up in the folders of the one before."""
    parts = dotted.split(".")
    try:
        spec = importlib.util.find_spec(parts[0])  # a top-level name: no code runs
        for depth in range(1, len(parts)):
            if spec is None or spec.submodule_search_locations is None:
                return False
            name = ".".join(parts[: depth + 1])
            spec = importlib.machinery.PathFinder.find_spec(name, spec.submodule_search_locations)
    except (ImportError, ValueError):
        return False
    return spec is not None


def parse_optimizer(f: Fields) -> OptimizerSpec:
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
    sampler = check_sampler(f.raw("sampler", "random"), _sampler_options(f))
    options = dict(f.raw("sampler_options", {}))
    if f.has("hyperband"):
        return _hyperband(f, sampler, options)
    trials = f.integer("trials", minimum=1, maximum=MAX_TRIALS)
    eta = f.integer("reduction_factor", 2, minimum=2)
    most = most_stages(trials, eta)
    stages = f.integer("stages", default_stages(trials, eta), minimum=1)
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
        epochs_per_stage=f.integer("epochs_per_stage", DEFAULT_EPOCHS_PER_STAGE, minimum=1),
        stages=stages,
        metric=_metric(f),
        mode=f.choice("mode", MODES) if f.has("mode") else None,
        sampler=sampler,
        sampler_options=options,
    )
    f.finish()
    return spec


def _metric(f: Fields) -> str:
    """``tuning.metric``: loss, accuracy or the name of a metric the trials report."""
    metric = f.text("metric", "loss")
    if not re.fullmatch(r"[A-Za-z_][\w.\-]*", metric):
        raise f.fail(
            "metric",
            metric,
            f"must be {' or '.join(METRICS)} or the name of a metric the trials report",
        )
    return metric


def _sampler_options(f: Fields) -> dict[str, Any]:
    options = f.raw("sampler_options", {})
    if not isinstance(options, Mapping):
        raise f.fail("sampler_options", options, "must be a mapping of option names to values")
    return dict(options)


def _hyperband(f: Fields, sampler: str, options: dict[str, Any]) -> TuningSpec:
    """``tuning.hyperband: R``: every Hyperband bracket for a largest budget of R epochs."""
    given = [key for key in ("trials", "stages", "epochs_per_stage") if f.has(key)]
    if given:
        raise f.fail(
            "hyperband",
            f.raw("hyperband"),
            f"sets the brackets' trials, stages and epochs; leave out {', '.join(given)}",
        )
    spec = TuningSpec(
        trials=1,  # the brackets' sum, set by the spec
        reduction_factor=f.integer("reduction_factor", 3, minimum=2),
        metric=_metric(f),
        mode=f.choice("mode", MODES) if f.has("mode") else None,
        sampler=sampler,
        sampler_options=options,
        hyperband=f.integer("hyperband", minimum=1, maximum=10_000),
    )
    if spec.trials > MAX_TRIALS:
        raise f.fail(
            "hyperband", spec.hyperband, f"makes {spec.trials:,} trials; at most {MAX_TRIALS:,}"
        )
    f.finish()
    return spec


WINDSR_MODELS = ("windsr", "windsr-srcnn")


def parse_assimilate(
    value: Any, model: str, base_dir: Path, data: DatasetSpec | None = None
) -> AssimilateSpec:
    """``assimilate:`` of a WindSR job: a stations file (relative to the job file) is read for
    its cells, which must lie inside generated patches; the rest is the WindSR models' own
    rule (``read_assimilation``)."""
    from faasml.workloads.windsr.assimilate import STATIONS_RULE, read_assimilation
    from faasml.workloads.windsr.inference import read_stations

    if model not in WINDSR_MODELS:
        raise ConfigError(
            f"assimilate applies to the WindSR models ({', '.join(WINDSR_MODELS)}), but the "
            f"job's model is {model!r}"
        )
    fields = dict(Fields(value, "assimilate", ConfigError).data)
    stations = fields.get("stations", "data")
    cells: tuple[tuple[int, int], ...] = ()
    if isinstance(stations, str) and stations != "data":
        path = (base_dir / Path(stations).expanduser()).resolve()
        if not path.is_file():
            raise ConfigError(
                f"the value of assimilate.stations is {shown(stations)}, but {STATIONS_RULE}; "
                f"{path} is not a file"
            )
        side = data.options.get("size", 32) if data and data.synthetic == "wind-sr" else None
        found = read_stations(path, None, side if isinstance(side, int) else None)
        cells = tuple(zip(found.rows[0].tolist(), found.cols[0].tolist(), strict=True))
        stations = str(path)
        fields["stations"] = [list(c) for c in cells]
    setting = read_assimilation(fields, "assimilate")
    if cells:
        return AssimilateSpec(stations, setting.radius, setting.strength, setting.inpaint, cells)
    assert isinstance(setting.stations, str | int)
    return AssimilateSpec(setting.stations, setting.radius, setting.strength, setting.inpaint)


def _training(f: Fields) -> TrainingSpec:
    spec = TrainingSpec(
        target_loss=f.optional_number("target_loss", minimum=0.0, strict_minimum=True),
        max_epochs=f.integer("max_epochs", 10, minimum=1),
    )
    f.finish()
    return spec
