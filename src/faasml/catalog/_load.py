"""Loading and validating catalog files; built-in catalogs are found by name."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from faasml._validate import Fields, load_yaml, shipped_or_path
from faasml.catalog._schema import (
    SCHEMES,
    Architecture,
    Catalog,
    FunctionPlatform,
    PiecewiseLinear,
    Source,
    StorageService,
)
from faasml.exceptions import CatalogError

DATA_DIR = Path(__file__).parent / "data"
FORMAT_VERSION = 1


def builtin_catalogs() -> list[str]:
    """Names of the catalogs shipped with faasml."""
    return sorted(path.stem for path in DATA_DIR.glob("*.yaml"))


def load_catalog(name_or_path: str | os.PathLike[str] = "aws-lambda") -> Catalog:
    """Load a shipped catalog by name or a user's catalog file by path, validating every field."""
    path = shipped_or_path(name_or_path, DATA_DIR, "catalog")
    return parse_catalog(load_yaml(path, CatalogError), where=str(path), path=str(path))


def parse_catalog(data: Any, *, where: str = "catalog", path: str | None = None) -> Catalog:
    """Build a Catalog from a parsed YAML mapping; errors name the field and the rule."""
    top = Fields(data, "", CatalogError)
    fmt = top.integer("format", minimum=1)
    if fmt != FORMAT_VERSION:
        raise top.fail("format", fmt, f"this faasml reads catalog format {FORMAT_VERSION}")
    name = top.text("name")
    version = str(top.raw("version"))
    date = str(top.raw("date"))
    sources = parse_sources(top)
    platform = _platform(top.sub("platform"))
    storage_items = top.sub("storage")
    storages: dict[str, StorageService] = {}
    for storage_name in list(storage_items.data):
        storages[storage_name] = _storage(storage_name, storage_items.sub(storage_name), platform)
    storage_items.finish()
    if not storages:
        raise CatalogError(f"{where}: storage must list at least one service")
    if platform.data_store not in storages:
        raise CatalogError(
            f"the value of platform.data_store is {platform.data_store!r}, but must name one "
            f"of the catalog's storage services: {', '.join(sorted(storages))}"
        )
    top.finish()
    return Catalog(name, version, date, platform, storages, sources, path)


def parse_sources(fields: Fields, name: str = "sources") -> tuple[Source, ...]:
    """An optional list of {what, reference, date} entries."""
    if not fields.has(name):
        fields.raw(name, None)
        return ()
    out = []
    for index, item in enumerate(fields.items(name)):
        entry = Fields(item, f"{fields.path(name)}[{index}]", fields.error)
        out.append(Source(entry.text("what"), entry.text("reference"), str(entry.raw("date"))))
        entry.finish()
    return tuple(out)


def _auto(fields: Fields, name: str, resolved: float) -> float:
    """A field that may say 'auto': resolved from the machine faasml runs on."""
    if fields.raw(name, None) == "auto":
        return resolved
    return fields.number(name, minimum=0, strict_minimum=True)


def _machine_memory_mb() -> float:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20
    except (ValueError, OSError, AttributeError):  # pragma: no cover - non-POSIX
        return 4096.0


def _platform(fields: Fields) -> FunctionPlatform:
    arch_fields = fields.sub("architectures")
    architectures = {}
    for arch in list(arch_fields.data):
        entry = arch_fields.sub(arch)
        architectures[arch] = Architecture(
            price_per_gb_s=entry.number("price_per_gb_s", minimum=0),
            compute_speed=entry.number("compute_speed", 1.0, minimum=0, strict_minimum=True),
        )
        entry.finish()
    arch_fields.finish()
    if not architectures:
        raise fields.fail("architectures", {}, "must list at least one architecture")
    default_arch = fields.choice("architecture", architectures, next(iter(architectures)))

    machine_memory = _machine_memory_mb()
    capacity_vcpus: float | None = None
    capacity_memory: float | None = None
    if fields.has("capacity_vcpus"):
        capacity_vcpus = _auto(fields, "capacity_vcpus", float(os.cpu_count() or 1))
    if fields.has("capacity_memory_mb"):
        # Leave a quarter of the machine to the coordinator, stores and the OS.
        capacity_memory = _auto(fields, "capacity_memory_mb", 0.75 * machine_memory)
    memory_min = fields.integer("memory_min_mb", minimum=1)
    memory_max = int(_auto(fields, "memory_max_mb", capacity_memory or machine_memory))
    if memory_max < memory_min:
        raise fields.fail("memory_max_mb", memory_max, f"must be >= memory_min_mb ({memory_min})")
    points = []
    for index, point in enumerate(fields.items("network_mbps")):
        ok = (
            isinstance(point, list)
            and len(point) == 2
            and all(isinstance(v, int | float) and v >= 0 for v in point)
        )
        if not ok:
            raise fields.fail(
                f"network_mbps[{index}]", point, "must be a pair [memory_mb, MB/s] of numbers >= 0"
            )
        points.append((float(point[0]), float(point[1])))
    if [p[0] for p in points] != sorted(p[0] for p in points):
        raise fields.fail("network_mbps", points, "must be sorted by memory")
    platform = FunctionPlatform(
        name=fields.text("name"),
        architectures=architectures,
        architecture=default_arch,
        price_per_invocation=fields.number("price_per_invocation", minimum=0),
        memory_min_mb=memory_min,
        memory_max_mb=memory_max,
        memory_step_mb=fields.integer("memory_step_mb", minimum=1),
        mb_per_vcpu=fields.number("mb_per_vcpu", minimum=0, strict_minimum=True),
        max_vcpus=_auto(fields, "max_vcpus", float(os.cpu_count() or 1)),
        max_duration_s=fields.number("max_duration_s", minimum=0, strict_minimum=True),
        concurrency_limit=int(_auto(fields, "concurrency_limit", float(os.cpu_count() or 1) * 16)),
        cold_start_s=fields.number("cold_start_s", minimum=0),
        warm_start_s=fields.number("warm_start_s", minimum=0),
        bills_cold_start=fields.boolean("bills_cold_start"),
        network_mbps=PiecewiseLinear(tuple(points)),
        data_store=fields.text("data_store"),
        capacity_vcpus=capacity_vcpus,
        capacity_memory_mb=capacity_memory,
        cold_start_scales_with_cpu=fields.boolean("cold_start_scales_with_cpu", False),
    )
    fields.raw("sources", None)
    fields.finish()
    return platform


def _scheme_latencies(fields: Fields, schemes: list[str]) -> dict[str, float]:
    """``scheme_latency_s``: effective latency per transfer by scheme (each a scheme offered)."""
    if not fields.has("scheme_latency_s"):
        return {}
    entry = fields.sub("scheme_latency_s")
    latencies = {}
    for scheme in list(entry.data):
        if scheme not in schemes:
            raise entry.fail(
                str(scheme), entry.data[scheme], f"must be one of: {', '.join(schemes)}"
            )
        latencies[str(scheme)] = entry.number(str(scheme), minimum=0)
    entry.finish()
    return latencies


def _storage(name: str, fields: Fields, platform: FunctionPlatform) -> StorageService:
    pricing = fields.choice("pricing", ("request", "time", "function"))
    schemes = fields.items("schemes")
    for index, scheme in enumerate(schemes):
        if scheme not in SCHEMES:
            raise fields.fail(f"schemes[{index}]", scheme, f"must be one of: {', '.join(SCHEMES)}")
    node: str | None = None
    hourly = 0.0
    aggregate = fields.optional_number("aggregate_mbps", minimum=0, strict_minimum=True)
    node_memory: float | None = None
    if fields.has("nodes"):
        nodes = fields.sub("nodes")
        node = fields.choice("node", list(nodes.data))
        for node_name in list(nodes.data):
            entry = nodes.sub(node_name)
            values = (
                entry.number("hourly_usd", minimum=0),
                entry.number("bandwidth_mbps", minimum=0, strict_minimum=True),
                entry.number("memory_mb", minimum=0, strict_minimum=True),
            )
            entry.finish()
            if node_name == node:
                hourly, aggregate, node_memory = values
        nodes.finish()
    if pricing == "time" and node is None:
        raise fields.fail("nodes", None, "must list node types for a time-priced service")
    cache_nodes, cache_memory = 0, 0.0
    if pricing == "function":
        # Cache nodes are functions of this platform (InfiniCache): while the run holds
        # them they cost their GB-seconds, the model's hourly price.
        cache_nodes = fields.integer("cache_nodes", minimum=1)
        cache_memory = fields.number("cache_memory_mb", minimum=0, strict_minimum=True)
        hourly = cache_nodes * cache_memory / 1024.0 * 3600.0 * platform.price_per_gb_s
    service = StorageService(
        name=name,
        description=fields.text("description", name),
        pricing=pricing,
        schemes=tuple(schemes),
        latency_s=fields.number("latency_s", minimum=0),
        connection_mbps=fields.number("connection_mbps", minimum=0, strict_minimum=True),
        aggregate_mbps=aggregate,
        put_usd=fields.number("put_usd", 0.0, minimum=0),
        get_usd=fields.number("get_usd", 0.0, minimum=0),
        put_unit_kb=fields.optional_number("put_unit_kb", minimum=0, strict_minimum=True),
        get_unit_kb=fields.optional_number("get_unit_kb", minimum=0, strict_minimum=True),
        hourly_usd=hourly,
        node=node,
        node_memory_mb=node_memory,
        max_item_kb=fields.optional_number("max_item_kb", minimum=0, strict_minimum=True),
        sources=parse_sources(fields),
        scheme_latency_s=_scheme_latencies(fields, schemes),
        cache_nodes=cache_nodes,
        cache_memory_mb=cache_memory,
        offered=fields.choice("offered", ("always", "named"), "always"),
    )
    fields.finish()
    return service
