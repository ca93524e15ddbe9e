"""InfiniCache: an erasure-coded object cache in the memory of functions (dissertation
Chapter 4; Wang et al., FAST'20).

``infinicache://?data=4&parity=2&nodes=8&memory=256`` describes a deployment (a proxy in
this process and ``nodes`` cache-node functions on the local platform, or on the Ray platform
with ``platform=ray``); ``infinicache://127.0.0.1:PORT`` joins a running one. Its nodes are
functions, so whoever starts one passes the platform opener
(``with InfiniCache(Options(...), open_platform) as cache: open_store(cache.url)``;
``faasml.runtime.platforms.infinicache.start_infinicache(url)`` does it with faasml's platforms).

The names are imported on first use, so that a cache node (which imports ``.node`` only)
does not carry the proxy's imports in its memory.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from faasml.sync.stores.infinicache._options import Options, parse_url
    from faasml.sync.stores.infinicache._state import NodePlatform, OpenPlatform
    from faasml.sync.stores.infinicache.proxy import InfiniCache, InfiniCacheStats
    from faasml.sync.stores.infinicache.store import InfiniCacheStore

_WHERE = {
    "Options": "_options",
    "parse_url": "_options",
    "InfiniCache": "proxy",
    "InfiniCacheStats": "proxy",
    "InfiniCacheStore": "store",
    "NodePlatform": "_state",
    "OpenPlatform": "_state",
}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)


__all__ = [
    "InfiniCache",
    "InfiniCacheStats",
    "InfiniCacheStore",
    "NodePlatform",
    "OpenPlatform",
    "Options",
    "parse_url",
]
