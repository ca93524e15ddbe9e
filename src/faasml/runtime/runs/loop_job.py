"""A job file whose ``model:`` names the user's own training loop (``module.path:train_loop``).

Which reference is a loop: a function with exactly two required positional parameters, neither
named by the model's options, is called once as ``(config, ctx)`` (``loop.model``'s probe, the
Tuner's rule); anything else is a model factory called as ``factory(**options)``. A loop
brings its own data (``ctx.shard``), so its job file holds no ``dataset:`` and no
``optimizer:``; the model's other keys are constants of the loop's ``config``, and the search
space's keys (``lr`` or ``model.lr``) are the names the loop reads from ``config``.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from faasml.exceptions import ConfigError
from faasml.job import JobSpec, from_mapping, load_job
from faasml.job.parse import is_reference
from faasml.runtime.runs.job_guard import SELF_CHECKED

_STAND_IN = {"synthetic": "higgs-like", "samples": 100_000}
"""The data a loop's job is read with until ``loop_job`` puts the loop's own in (never run)."""


def read_job(
    path: str | Path, overrides: Mapping[str, Any] | None = None, *, run_code: bool = True
) -> JobSpec:
    """``load_job``; a job whose model names a training loop is read without a dataset.
    ``run_code=False`` (``faasml job check``): which model is a loop is read from its source
    (``job.checks.model_kind``), its module not imported."""
    from faasml._validate import load_yaml

    data = load_yaml(Path(path), ConfigError)
    model = data.get("model") if isinstance(data, Mapping) else None
    name = model.get("name") if isinstance(model, Mapping) else model
    given = dict(overrides or {})
    if isinstance(name, str) and _names_loop(name, model, run_code):
        for field in ("dataset", "optimizer"):
            if field in data or any(k.split(".")[0] == field for k in given):
                raise ConfigError(
                    f"the job's model {name!r} is a training loop, which brings its own data "
                    f"and optimiser: remove {field} from the job (docs/your-own-loop.md)"
                )
        given["dataset"], given["optimizer"] = dict(_STAND_IN), {"name": "sgd", "lr": 0.1}
    return load_job(path, given)


def _names_loop(name: str, model: object, run_code: bool) -> bool:
    if run_code:
        return _loop_function(name, model) is not None
    from faasml.job.checks import model_kind

    options = {k: v for k, v in model.items() if k != "name"} if isinstance(model, Mapping) else {}
    return model_kind(name, options).kind == "loop"


def _loop_function(name: str, model: object) -> Callable[..., Any] | None:
    """The function ``name`` imports when it is a training loop (by its parameters)."""
    if not is_reference(name) or name in SELF_CHECKED:
        return None
    module, _, attribute = name.partition(":")
    try:
        function = getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError) as err:
        raise ConfigError(f"cannot load model {name!r}: {err}") from None
    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return None
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    required = [p for p in parameters if p.default is p.empty and p.kind in positional]
    options = set(model) if isinstance(model, Mapping) else set()
    if len(required) != 2 or any(p.name in options for p in required):
        return None
    keyword_only = [p for p in parameters if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    return None if keyword_only else function


def names_loop(job: JobSpec) -> bool:
    """Whether ``job``'s model names a training loop (imported: only a run asks)."""
    return _loop_function(job.model.name, {"name": job.model.name, **job.model.options}) is not None


def loop_job(job: JobSpec, folder: Path) -> JobSpec:
    """``job`` as a loop's job (``faasml.Tuner``'s shape: the loop pickled and signed, its
    data a stand-in of its rows in ``folder``) where its model names a loop; else ``job``."""
    options = dict(job.model.options)
    function = _loop_function(job.model.name, {"name": job.model.name, **options})
    if function is None:
        return job
    from faasml.loop.model import LoopShape, inspect_train_fn
    from faasml.workloads import function_model as fm

    space = _loop_space(job)
    first = {}
    if space:
        from faasml.searchspace import parse_search_space

        first = parse_search_space(space).sample(1, job.seed)[0]
    config = {**options, **{k.removeprefix("model.config."): v for k, v in first.items()}}
    config.pop("batch_size", None)
    batch_size = first.get("batch_size", job.batch_size)
    found = inspect_train_fn(function, config, job.seed, batch_size, "batch_size" in space)
    if not isinstance(found, LoopShape):
        raise ConfigError(
            f"the job's model {job.model.name!r} returns faasml.TorchTrainable: a job file "
            "names a training loop or a model factory; pass a training function to faasml.Tuner"
        )
    packed, digest = fm.pack_function(function)
    model: dict[str, Any] = {"name": "faasml.loop.model:loop_model", "function": packed}
    model.update(sha256=digest, signature=fm.sign_packed(packed), config=config, seed=job.seed)
    model.update(label=job.model.name, params=found.params, buffers=found.buffers)
    model.update(structure=found.structure, batch_in_config="batch_size" in space)
    folder.mkdir(parents=True, exist_ok=True)
    data = job.to_dict(redact=False)
    data.update(model=model, dataset=_stand_in_data(found.samples, folder, job.seed))
    data["optimizer"] = {"name": "sgd", "lr": 0.1}  # unused: the loop steps its own optimiser
    data.setdefault("profile", "mobilenet-cifar10")
    if space:
        data["search_space"] = space
    return from_mapping(data, source=job.source)


def _loop_space(job: JobSpec) -> dict[str, Any]:
    """The search space with its keys as job paths of the loop's config (``model.config.x``)."""
    written = job.to_dict(redact=False).get("search_space") or {}

    def key(name: str) -> str:
        if name == "batch_size":
            return name
        if name.startswith("optimizer."):
            raise ConfigError(
                f"search_space has {name!r}, but a training loop steps its own optimiser: name "
                "the value the loop reads from config (e.g. lr)"
            )
        return "model.config." + name.removeprefix("model.")

    space: dict[str, Any] = {}
    for name, value in written.items():
        when = value.get("when") if isinstance(value, Mapping) else None
        if isinstance(when, Mapping):
            value = {**value, "when": {key(str(k)): v for k, v in when.items()}}
        space[key(str(name))] = value
    return space


def _stand_in_data(rows: int, folder: Path, seed: int) -> dict[str, Any]:
    """A stand-in of the loop's ``rows`` (the planner counts rounds and partitions with it;
    the workers train on what the loop shards)."""
    import numpy as np

    from faasml.workloads.data import Dataset, write_npz
    from faasml.workloads.function_model import combine

    train = Dataset.from_arrays(np.zeros((rows, 1), np.float32), np.arange(rows) % 2, 2)
    test = Dataset.from_arrays(np.zeros((2, 1), np.float32), np.arange(2), 2)
    combined, fraction = combine(train, test, seed)
    write_npz(folder / "data.npz", combined)
    path = str((folder / "data.npz").resolve())
    return {"path": path, "format": "npz", "test_fraction": fraction, "seed": seed}


__all__ = ["loop_job", "names_loop", "read_job"]
