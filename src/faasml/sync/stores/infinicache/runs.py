"""InfiniCache as a run's storage choice: the deployment a job's ``infinicache://?...`` URL
asks for, started by the run (its workers join it by ``infinicache://127.0.0.1:PORT``) and
stopped after, priced for the planner by the URL's nodes and memory and billed from the
nodes' real invocations.
"""

from __future__ import annotations

import dataclasses
from urllib.parse import urlsplit

from faasml.catalog import Catalog, FunctionPlatform, StorageService
from faasml.sync.stores.infinicache._options import parse_url


def starts_deployment(url: str | None) -> bool:
    """Whether ``url`` asks for a deployment of its own (an infinicache URL without host)."""
    if url is None:
        return False
    parts = urlsplit(url)
    return parts.scheme == "infinicache" and not parts.hostname


def priced(service: StorageService, url: str, platform: FunctionPlatform) -> StorageService:
    """``service`` with the model's price for the deployment ``url`` asks for: its nodes ×
    memory billed as function GB-seconds for the whole run (an upper bound: nodes bill only
    while invoked, and a synchronising job keeps them busy)."""
    _, _, options = parse_url(url)
    hourly = options.nodes * options.memory / 1024.0 * 3600.0 * platform.price_per_gb_s
    return dataclasses.replace(
        service, cache_nodes=options.nodes, cache_memory_mb=float(options.memory), hourly_usd=hourly
    )


def priced_catalog(catalog: Catalog, stores: dict[str, str | None]) -> Catalog:
    """``catalog`` with every function-priced storage a job names priced by its URL."""
    storages = dict(catalog.storages)
    for name, url in stores.items():
        service = storages.get(name)
        if service is not None and service.pricing == "function" and starts_deployment(url):
            assert url is not None
            storages[name] = priced(service, url, catalog.platform)
    return dataclasses.replace(catalog, storages=storages)


def bill_usd(bill: dict[str, float], platform: FunctionPlatform) -> float:
    """A deployment's bill (``InfiniCache.bill``) priced with ``platform``: GB-seconds and
    invocations, keep-alives and backups included."""
    return bill["gb_s"] * platform.price_per_gb_s + bill["invocations"] * (
        platform.price_per_invocation
    )
