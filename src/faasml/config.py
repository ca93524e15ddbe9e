"""The YAML job file: what to train, on which data, how to tune it, and where to run it.

A job is read in layers, later ones winning: the file < the environment (``FAASML_*``) <
keyword overrides; the merged mapping is then validated once into a frozen ``JobSpec``, and
every error names the field and the rule (docs/jobs.md documents the format). Credentials
never belong in a job file: a store URL with a password in the file is refused, and
``JobSpec.to_dict()`` redacts one that came from the environment.

This module reads the file and its layers; the rest lives beside it, one job each:
``_jobspec`` (the frozen records), ``_jobparse`` (a mapping read field by field),
``_jobcheck`` (the checks that reach into data, models, catalogs and platforms) and
``_layers`` (environment variables, ``--set`` assignments, credentials).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faasml._jobcheck import check_data, check_job
from faasml._jobparse import PROVIDED_STORES, parse_job
from faasml._jobspec import (
    METRICS,
    DatasetSpec,
    JobSpec,
    ModelSpec,
    OptimizerSpec,
    TrainingSpec,
    TuningSpec,
    resolve_hyperparameter,
)
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
from faasml._validate import load_yaml
from faasml.exceptions import ConfigError


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
    return parse_job(merged, file.resolve().parent, str(file))


__all__ = [
    "ENV_FIELDS",
    "ENV_PREFIX",
    "ENV_SECTIONS",
    "METRICS",
    "PROVIDED_STORES",
    "DatasetSpec",
    "JobSpec",
    "ModelSpec",
    "OptimizerSpec",
    "TrainingSpec",
    "TuningSpec",
    "check_data",
    "check_job",
    "environment_overrides",
    "load_job",
    "parse_assignments",
    "redact_url",
    "resolve_hyperparameter",
]
