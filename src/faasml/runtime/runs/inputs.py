"""What a run is made from before it runs: the job as the performance model sees it, the
catalog narrowed to its stores, the constraint as a record keeps it, and the platform options
a resumed run needs again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from faasml.catalog import Catalog
from faasml.exceptions import ConfigError
from faasml.job import JobSpec
from faasml.runtime.record.codec import constraint_json
from faasml.types import Constraint, Objective
from faasml.workload import Workload, load_workload
from faasml.workloads import Model
from faasml.workloads.data import Dataset

DEFAULT_PROFILE = "lr-higgs"


def job_workload(
    job: JobSpec, train: Dataset, model: Model, batch_size: int | None = None
) -> Workload:
    """The job as the performance model sees it: its real data and model sizes on the compute
    profile named by ``profile:`` (a shipped profile or a file ``faasml profile`` wrote), and its
    batch size, the global batch (rounds per epoch do not depend on n), with the smallest one
    the search space may draw (no trial gets more functions than its batch allows)."""
    base = load_workload(job.profile or DEFAULT_PROFILE)
    space = job.search_space
    smallest = None
    if space is not None and "batch_size" in space.params:
        smallest = min(int(value) for value in space.params["batch_size"].extremes())
    return dataclasses.replace(
        base,
        name=job.name,
        dataset_mb=max(train.size_mb, 1e-6),
        samples=len(train),
        model_mb=model.size_mb,
        batch_size=batch_size or job.batch_size,
        global_batch=True,
        smallest_batch=smallest,
    )


def constraint_dict(constraint: Constraint) -> dict[str, Any]:
    """The constraint as a record's JSON keeps it."""
    return constraint_json(constraint)


def constraint_from_dict(data: dict[str, Any]) -> Constraint:
    """The constraint a record's JSON kept (``constraint_dict`` read back)."""
    return Constraint(data.get("budget_usd"), data.get("deadline_s"), Objective(data["objective"]))


def recordable_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The platform options a resumed run needs again: plain values, none holding a password
    (a redacted one would only fail on resume)."""
    from faasml.job.layers import has_password

    return {
        key: value
        for key, value in options.items()
        if isinstance(value, str | int | float | bool)
        and not (isinstance(value, str) and has_password(value))
    }


def stores_catalog(catalog: Catalog, stores: Mapping[str, str | None]) -> Catalog:
    """``catalog`` synchronising only through the job's stores (each must be priced there)."""
    missing = [name for name in stores if name not in catalog.storages]
    if missing:
        raise ConfigError(
            f"the job synchronises through {', '.join(missing)}, but catalog {catalog.name} "
            f"prices no storage of that name; it offers {', '.join(sorted(catalog.storages))} "
            "(name the job's stores after them, or point catalog: at one that prices yours)"
        )
    if any(url and url.startswith("infinicache:") for url in stores.values()):
        from faasml.sync.stores.infinicache.runs import priced_catalog

        catalog = priced_catalog(catalog, dict(stores))  # priced by the URL's nodes x memory
    return catalog.restricted_to(list(stores))
