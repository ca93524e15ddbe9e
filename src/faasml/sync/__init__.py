"""Synchronisation: stores (where values live) and schemes (how workers aggregate) — MISSION C8."""

from faasml.sync._process import die_with_parent
from faasml.sync.schemes import SCHEME_CLASSES, SyncScheme
from faasml.sync.stores import STORES, Store, StoreStats, open_store

__all__ = [
    "SCHEME_CLASSES",
    "STORES",
    "Store",
    "StoreStats",
    "SyncScheme",
    "die_with_parent",
    "open_store",
]
