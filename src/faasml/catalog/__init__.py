"""Catalogs of function platforms and storage services (MISSION C1)."""

from faasml.catalog._load import (
    DATA_DIR,
    builtin_catalogs,
    load_catalog,
    parse_catalog,
    parse_sources,
)
from faasml.catalog._schema import (
    SCHEMES,
    Architecture,
    Catalog,
    FunctionPlatform,
    PiecewiseLinear,
    Source,
    StorageService,
)

__all__ = [
    "DATA_DIR",
    "SCHEMES",
    "Architecture",
    "Catalog",
    "FunctionPlatform",
    "PiecewiseLinear",
    "Source",
    "StorageService",
    "builtin_catalogs",
    "load_catalog",
    "parse_catalog",
    "parse_sources",
]
