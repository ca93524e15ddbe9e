"""The YAML job file: what to train, on which data, how to tune it, and where to run it.

A job is read in layers, later ones winning: the file < the environment (``FAASML_*``) <
keyword overrides; the merged mapping is then validated once into a frozen ``JobSpec``, and
every error names the field and the rule (docs/jobs.md documents the format). Credentials
never belong in a job file: a store URL with a password in the file is refused, and
``JobSpec.to_dict()`` redacts one that came from the environment.

This module reads the file and its layers, parses the merged mapping once and checks the
result once (``faasml.job.checks``).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from faasml._validate import load_yaml
from faasml.exceptions import ConfigError
from faasml.job.checks import check_job
from faasml.job.layers import ENV_PREFIX, environment_overrides, has_password, set_path
from faasml.job.parse import parse_job
from faasml.job.spec import JobSpec


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
    job = parse_job(merged, file.resolve().parent, str(file))
    check_job(job)
    return job


def from_mapping(
    data: Mapping[str, Any], *, base_dir: Path | None = None, source: str | None = None
) -> JobSpec:
    """Parse and check a job mapping (a run record's ``job``, one built in Python); relative
    dataset paths resolve against ``base_dir`` (default: here)."""
    job = parse_job(data, base_dir or Path.cwd(), source)
    check_job(job)
    return job
