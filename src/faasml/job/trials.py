"""One trial's configuration applied to a valid job, and the rules a configuration may break.

``apply_config`` replaces the sections a configuration sets (``dataclasses.replace``), reads
each changed section again with the parser's own rule, then checks what that change can break
(batch size against the data, a model's size), so a trial costs no parse of the whole job.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from faasml._validate import MAX_DATA_VALUES, MAX_PARAMS, Fields, check_size, count_text, shown
from faasml.exceptions import ConfigError
from faasml.job.layers import set_path
from faasml.job.parse import is_reference, parse_batch_size, parse_model, parse_optimizer
from faasml.job.spec import DatasetSpec, JobSpec
from faasml.job.workflow import check_workflow
from faasml.workloads.build import build_model
from faasml.workloads.data import generate_dataset
from faasml.workloads.optim import OPTIMIZERS

FUNCTION_CONFIG = "model.config."
"""Where a training function's or loop's own configuration sits in a trial's configuration."""


def author_names(
    model: str, config: Mapping[str, Any], constants: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """A trial's configuration by the names its author wrote: for a training function or
    loop (``model``: its factory), plain names (``model.config.lr`` -> ``lr``) after its
    ``constants``; for a job file's model, the dotted paths as they are."""
    from faasml.loop import LOOP_FACTORY
    from faasml.workloads.function_model import FACTORY

    if model not in (FACTORY, LOOP_FACTORY):
        return dict(config)
    named = {k.removeprefix(FUNCTION_CONFIG): v for k, v in config.items()}
    return {**dict(constants or {}), **named}


def apply_config(job: JobSpec, config: Mapping[str, Any]) -> JobSpec:
    """``job`` with one configuration applied (keys as in ``search_space``), each changed
    section validated again; raises a one-line ``ConfigError`` naming the field."""
    if not config:
        return job
    model = {"name": job.model.name, **copy.deepcopy(dict(job.model.options))}
    optimizer = {"name": job.optimizer.name, **copy.deepcopy(dict(job.optimizer.hyperparameters))}
    top: dict[str, Any] = {}
    for key, value in config.items():
        section, _, rest = resolve_hyperparameter(key, job.optimizer.name).partition(".")
        value = copy.deepcopy(value)
        if section == "model":
            set_path(model, rest, value)
        elif section == "optimizer":
            set_path(optimizer, rest, value)
        else:
            top[section] = value
    changes: dict[str, Any] = {}
    if model != {"name": job.model.name, **job.model.options}:
        changes["model"] = parse_model(model)
    if optimizer != {"name": job.optimizer.name, **job.optimizer.hyperparameters}:
        changes["optimizer"] = parse_optimizer(Fields(optimizer, "optimizer", ConfigError))
    if "batch_size" in top:
        changes["batch_size"] = parse_batch_size(Fields(top, "", ConfigError))
    trial = dataclasses.replace(job, **changes)
    check_trial(trial, model="model" in changes)
    return trial


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


def check_trial(job: JobSpec, *, model: bool = True) -> None:
    """The rules a trial's configuration may break: its batch size against the data and, where
    ``model`` (the model changed), the built-in model's size on two generated samples. A
    ``module:factory`` model is the user's code: it is built when the job runs, not here."""
    spec = job.dataset
    if spec.synthetic is None:
        return  # a file's size and shape are known once it is read: see ``check_data``
    check_batch_size(job.batch_size, training_samples(spec), spec)
    if job.workflow is not None:
        check_workflow(job.workflow, training_samples(spec))
    if not model:
        return
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
    if is_reference(job.model.name):
        return
    built = build_model(job.model, sample.input_shape, sample.num_classes)
    # Built-in networks are refused before they are built; a linear model allocates nothing
    # until its parameters are made: all are bounded here.
    check_size(f"model '{job.model.name}'", built.num_params, MAX_PARAMS, "parameters", ConfigError)
    check_sample = getattr(built, "check_sample", None)  # a model that can say the data is not its
    if callable(check_sample):
        check_sample(sample.features)


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
