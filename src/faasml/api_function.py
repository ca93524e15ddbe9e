"""A training function as a job (``faasml.Tuner(train_fn, param_space)``): its data taken
once into the run's folder, its model the function itself (``workloads.function_model``),
its search space the distributions of ``param_space`` under job paths."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from faasml._validate import shown
from faasml.exceptions import ConfigError
from faasml.job import JobSpec, from_mapping
from faasml.job.layers import set_path
from faasml.searchspace import KINDS, parse_distribution, parse_search_space
from faasml.workloads.function_model import TorchTrainable

DEFAULT_BATCH = 64
"""A training function's batch size where neither the space nor the settings give one."""

Folder = Callable[[str], Path]
"""The run's folder for a function's data, by the job's name (checked new: never over a run)."""


@dataclass(frozen=True)
class FunctionSpace:
    """A training function's ``param_space`` split: the distributions under job paths, the
    caller's name of each, and the constants passed as they are."""

    searched: dict[str, Any]
    keys: dict[str, str]
    """Job path -> the name the function reads from ``config``."""
    constants: dict[str, Any]
    fixed: dict[str, Any]
    """Job settings the space fixes: a constant ``batch_size`` (faasml's global batch size,
    not in ``config``), unless the settings give one."""


def function_job(
    function: Callable[..., Any],
    space: Mapping[str, Any],
    tuning: dict[str, Any],
    settings: dict[str, Any],
    folder: Folder,
) -> tuple[JobSpec, FunctionSpace]:
    """The job of a training function: its data taken once, its model the function; and the
    split of its space (how a trial's configuration goes back to the caller's names)."""
    from faasml.workloads import function_model as fm

    refused = [k for k in settings if k.split(".")[0] in ("model", "optimizer", "search_space")]
    refused += [k for k in settings if k in ("dataset.path", "dataset.format", "dataset")]
    if refused:
        raise ConfigError(
            f"settings cannot set {', '.join(refused)}: train_fn builds the model, chooses "
            "the optimiser and provides the data, and param_space is the search space"
        )
    packed, digest = fm.pack_function(function)
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", getattr(function, "__name__", "")).strip("-")
    name = str(settings.pop("name", name or "train-fn"))
    seed = settings.get("seed", 0)
    split = split_space(space)
    for key, value in split.fixed.items():
        settings.setdefault(key, value)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError(f"the value of seed is {seed!r}, but must be an integer >= 0")
    first = parse_search_space(split.searched).sample(1, seed)[0]
    config = {**split.constants}
    config.update({split.keys[k]: v for k, v in first.items() if k != "batch_size"})
    from faasml.loop.model import LoopShape, inspect_train_fn

    batch_size = settings.get("batch_size", first.get("batch_size", DEFAULT_BATCH))
    found = inspect_train_fn(function, config, seed, batch_size, "batch_size" in space)
    model: dict[str, Any] = {"function": packed, "sha256": digest, "config": config}
    model.update(signature=fm.sign_packed(packed), seed=seed, label=name)
    if isinstance(found, LoopShape):  # a training loop: its data stays in its code
        data = _loop_job(found, folder(name), model, "batch_size" in space, seed)
    else:
        data = _trainable_job(function, found, folder, model, settings, split.searched)
    data["name"], data["search_space"] = name, split.searched
    for key, value in {**settings, **tuning}.items():
        set_path(data, key, value)
    data["dataset"]["seed"] = data.get("seed", 0)
    return from_mapping(data), split


def split_space(space: Mapping[str, Any]) -> FunctionSpace:
    """``space`` split into distributions (checked, under job paths) and constants; refused
    in one line where a key is no name or no distribution is given."""
    searched: dict[str, Any] = {}
    keys: dict[str, str] = {}
    constants: dict[str, Any] = {}
    fixed: dict[str, Any] = {}
    for key, value in space.items():
        if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise ConfigError(
                f"param_space has key {key!r}, but a training function's keys must be "
                "names (letters, digits, _), read as config[name]"
            )
        if _is_distribution(key, value):
            job_key = _function_key(key)
            searched[job_key] = _function_when(value)
            keys[job_key] = key
        elif key == "batch_size":
            fixed["batch_size"] = value
        else:
            constants[key] = value
    if not searched:
        raise ConfigError(
            "param_space has no distribution to tune; give at least one, e.g. "
            "{'lr': {'loguniform': [0.001, 0.1]}}"
        )
    return FunctionSpace(searched, keys, constants, fixed)


def _trainable_job(
    function: Callable[..., Any],
    trainable: TorchTrainable,
    folder_of: Folder,
    model: dict[str, Any],
    settings: dict[str, Any],
    searched: dict[str, Any],
) -> dict[str, Any]:
    """The job of a function returning ``TorchTrainable``: its train and test sets written
    once to the run's folder (one file, the test share as ``test_fraction``), its model the
    function (``model``, the job's model section, completed with what workers rebuild it
    from)."""
    from faasml.workloads import function_model as fm
    from faasml.workloads.data import write_npz

    train, test = _function_data(trainable)
    name, seed = model["label"], model["seed"]
    folder = folder_of(name)  # checked new once the data is known good: never over a run
    dataset: dict[str, Any] = {"path": str((folder / "data.npz").resolve())}
    dataset["format"] = "npz"
    if test is not None:
        if "dataset.test_fraction" in settings:
            raise ConfigError(
                "settings set dataset.test_fraction, but train_fn returns its own test set"
            )
        combined, fraction = fm.combine(train, test, seed)
        write_npz(folder / "data.npz", combined)
        dataset["test_fraction"] = fraction
    else:
        write_npz(folder / "data.npz", train)
    # Kept under the model section's own key: the coordinator's model is this first call's.
    fm.remember(
        model["sha256"],
        model["config"],
        seed,
        trainable,
        train.input_shape,
        train.num_classes,
        name,
    )
    loader_batch = getattr(trainable.train, "batch_size", None)
    model.update(name=fm.FACTORY, shape=list(train.input_shape), classes=train.num_classes)
    model["structure"] = fm.function_structure(function, trainable)  # the profile's key
    return {
        "name": name,
        "model": model,
        "dataset": dataset,
        "optimizer": {"name": trainable.optimizer, **trainable.hyperparameters},
        "search_space": searched,
        "tuning": {"trials": 8},
        "batch_size": loader_batch if isinstance(loader_batch, int) else DEFAULT_BATCH,
        "profile": "mobilenet-cifar10",
    }


def _function_key(key: str) -> str:
    """A training function's parameter as a job path."""
    return "batch_size" if key == "batch_size" else f"model.config.{key}"


def _function_when(value: Mapping[str, Any]) -> Any:
    """A distribution whose ``when`` names a function's parameters, naming their job paths."""
    when = value.get("when")
    if not isinstance(when, Mapping):
        return value
    return {**value, "when": {_function_key(str(k)): v for k, v in when.items()}}


def _is_distribution(key: str, value: Any) -> bool:
    """True for a distribution (checked, named as the caller wrote it); False for a constant.
    A one-key mapping whose key is no distribution is refused: most likely a misspelt one.
    A distribution may add ``when`` (a conditional parameter)."""
    if isinstance(value, Mapping) and len(value) == 2 and "when" in value:
        value = {k: v for k, v in value.items() if k != "when"}
    if not (isinstance(value, Mapping) and len(value) == 1):
        return False
    kind = next(iter(value))
    if kind not in KINDS:
        raise ConfigError(
            f"param_space.{key} is {shown(value)}, whose key {shown(kind)} is not a "
            f"distribution; choose one of: {', '.join(KINDS)} (a constant mapping of one key "
            "is {'choice': [value]})"
        )
    parse_distribution(value, f"param_space.{key}")
    return True


def _function_data(trainable: TorchTrainable) -> tuple[Any, Any]:
    """The function's train and test sets (test None when it gives none)."""
    from faasml.workloads.function_model import as_dataset

    train = as_dataset(trainable.train, "train", trainable.num_classes)
    test = None if trainable.test is None else as_dataset(trainable.test, "test")
    classes = trainable.num_classes or max(
        train.num_classes, test.num_classes if test is not None else 2
    )
    train = as_dataset(train, "train", classes) if train.num_classes != classes else train
    if test is not None and test.num_classes != classes:
        test = as_dataset(test, "test", classes)
    return train, test


def _loop_job(
    shape: Any, folder: Path, model: dict[str, Any], batch_in_config: bool, seed: int
) -> dict[str, Any]:
    """The job of a training loop (``faasml.loop``): its model the loop, its data set a
    stand-in of the loop's D rows (the planner counts rounds and partitions with it; the
    workers train on what the loop shards)."""
    import numpy as np

    from faasml.loop import LOOP_FACTORY
    from faasml.workloads.data import Dataset, write_npz
    from faasml.workloads.function_model import combine

    rows = shape.samples
    train = Dataset.from_arrays(np.zeros((rows, 1), np.float32), np.arange(rows) % 2, 2)
    test = Dataset.from_arrays(np.zeros((2, 1), np.float32), np.arange(2), 2)
    combined, fraction = combine(train, test, seed)
    write_npz(folder / "data.npz", combined)
    model.update(name=LOOP_FACTORY, params=shape.params, buffers=shape.buffers)
    model.update(structure=shape.structure, batch_in_config=batch_in_config)
    dataset = {"path": str((folder / "data.npz").resolve()), "format": "npz"}
    return {
        "model": model,
        "dataset": {**dataset, "test_fraction": fraction},
        "optimizer": {"name": "sgd", "lr": 0.1},  # unused: the loop steps its own optimiser
        "tuning": {"trials": 8},
        "batch_size": DEFAULT_BATCH,
        "profile": "mobilenet-cifar10",
    }
