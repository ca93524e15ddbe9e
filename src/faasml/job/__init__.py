"""The job file: what to train, on which data, how to tune it, and where to run it.

Inside, one direction: ``layers`` (environment, ``--set``, credentials) and ``workflow`` <
``spec`` (plain frozen records) < ``parse`` (a mapping read field by field) < ``trials`` (one
configuration applied) < ``checks`` (workloads, catalogs, platforms) < ``load`` (a file read,
parsed once, checked once). docs/jobs.md documents the format.
"""

from __future__ import annotations

from faasml.job.checks import check_data, check_job
from faasml.job.layers import (
    ENV_FIELDS,
    ENV_PREFIX,
    ENV_SECTIONS,
    environment_overrides,
    parse_assignments,
    redact_url,
)
from faasml.job.load import from_mapping, load_job
from faasml.job.parse import PROVIDED_STORES
from faasml.job.spec import (
    METRICS,
    MODES,
    DatasetSpec,
    JobSpec,
    ModelSpec,
    OptimizerSpec,
    TrainingSpec,
    TuningSpec,
    implied_mode,
)
from faasml.job.trials import apply_config, author_names, resolve_hyperparameter

__all__ = [
    "ENV_FIELDS",
    "ENV_PREFIX",
    "ENV_SECTIONS",
    "METRICS",
    "MODES",
    "PROVIDED_STORES",
    "DatasetSpec",
    "JobSpec",
    "ModelSpec",
    "OptimizerSpec",
    "TrainingSpec",
    "TuningSpec",
    "apply_config",
    "author_names",
    "check_data",
    "check_job",
    "environment_overrides",
    "from_mapping",
    "implied_mode",
    "load_job",
    "parse_assignments",
    "redact_url",
    "resolve_hyperparameter",
]
